#include "ops/cpu/softmax.h"

#include <algorithm>
#include <cmath>

namespace ft::cpu {

template <class T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const T m = *std::max_element(xr, xr + cols);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(static_cast<double>(xr[c]) - m);
    for (int64_t c = 0; c < cols; ++c) yr[c] = static_cast<T>(std::exp(static_cast<double>(xr[c]) - m) / sum);
  }
}

template <class T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += static_cast<double>(yr[c]) * gr[c];
    for (int64_t c = 0; c < cols; ++c) dx[r * cols + c] = static_cast<T>(yr[c] * (gr[c] - dot));
  }
}

template void softmax_forward<float>(const float*, float*, int64_t, int64_t);
template void softmax_forward<double>(const double*, double*, int64_t, int64_t);
template void softmax_backward<float>(const float*, const float*, float*, int64_t, int64_t);
template void softmax_backward<double>(const double*, const double*, double*, int64_t, int64_t);

}  // namespace ft::cpu
