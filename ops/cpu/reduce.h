// Reference reductions on contiguous buffers viewed as (outer, r, inner), reducing over r.
#pragma once

#include <cstdint>

namespace ft::cpu {

// y (outer, inner) = scale * sum over r of x (outer, r, inner); accumulates in T.
template <class T>
void reduce_sum(const T* x, T* y, int64_t outer, int64_t r, int64_t inner, double scale);

// dx (outer, r, inner) = scale * dy (outer, inner) repeated along r.
template <class T>
void reduce_backward(const T* dy, T* dx, int64_t outer, int64_t r, int64_t inner, double scale);

// out (cols) += sum over rows of x (rows, cols), accumulated in double.
template <class T>
void sum_rows_into(const T* x, T* out, int64_t rows, int64_t cols);

}  // namespace ft::cpu
