#include "ops/cpu/gelu.h"

#include <cmath>

namespace ft::cpu {
namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCubic = 0.044715;
}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T t = std::tanh(static_cast<T>(kSqrt2OverPi) * (v + static_cast<T>(kCubic) * v * v * v));
    y[i] = static_cast<T>(0.5) * v * (static_cast<T>(1) + t);
  }
}

// d/dx [0.5 x (1 + tanh(u))], u = a (x + b x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) a (1 + 3 b x^2).
template <class T>
void gelu_backward(const T* dy, const T* x, T* dx, int64_t n) {
  const T a = static_cast<T>(kSqrt2OverPi), b = static_cast<T>(kCubic);
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T t = std::tanh(a * (v + b * v * v * v));
    const T d = static_cast<T>(0.5) * (1 + t) + static_cast<T>(0.5) * v * (1 - t * t) * a * (1 + 3 * b * v * v);
    dx[i] = dy[i] * d;
  }
}

template void gelu_forward<float>(const float*, float*, int64_t);
template void gelu_forward<double>(const double*, double*, int64_t);
template void gelu_backward<float>(const float*, const float*, float*, int64_t);
template void gelu_backward<double>(const double*, const double*, double*, int64_t);

}  // namespace ft::cpu
