#include "ops/cpu/relu.h"

namespace ft::cpu {

template <class T>
void relu_forward(const T* x, T* y, int64_t n) {
  // x > 0 ? x : 0 rather than max(x, 0): NaN stays NaN (max would drop it on one argument order).
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : (x[i] != x[i] ? x[i] : T(0));
}

template <class T>
void relu_backward(const T* dy, const T* x, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dy[i] : T(0);
}

template void relu_forward<float>(const float*, float*, int64_t);
template void relu_forward<double>(const double*, double*, int64_t);
template void relu_backward<float>(const float*, const float*, float*, int64_t);
template void relu_backward<double>(const double*, const double*, double*, int64_t);

}  // namespace ft::cpu
