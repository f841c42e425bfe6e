// Reference layernorm kernels over the last axis (contiguous buffers, T = float or double).
// Row statistics and the dweight/dbias sums accumulate in double, so the reference is at least
// as accurate as the CUDA kernels it checks.
#pragma once

#include <cstdint>

namespace ft::cpu {

// y = (x - mean) * rstd * w + b per row; x, y (rows, cols); w, b (cols); mean, rstd (rows).
template <class T>
void layernorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                       int64_t cols, double eps);

// dx (rows, cols) is written; dweight, dbias (cols) are overwritten with sums over all rows.
template <class T>
void layernorm_backward(const T* dy, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                        T* dweight, T* dbias, int64_t rows, int64_t cols);

}  // namespace ft::cpu
