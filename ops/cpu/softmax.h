// Reference softmax kernels over the last axis (contiguous (rows, cols) buffers, T = float or
// double). Row sums accumulate in double.
#pragma once

#include <cstdint>

namespace ft::cpu {

// y = exp(x - max) / sum(exp(x - max)) per row.
template <class T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t cols);
// dx = y * (dy - rowsum(dy * y)).
template <class T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t cols);

}  // namespace ft::cpu
