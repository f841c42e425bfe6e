// Reference embedding kernels (contiguous buffers). Ids are validated by the caller: all in
// [0, V).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ft::cpu {

// out[i] = weight[ids[i]]: a byte copy of one row per id, so it serves every dtype.
// ids (n); weight (V, row_bytes); out (n, row_bytes).
void embedding_forward(const int32_t* ids, const void* weight, void* out, int64_t n, size_t row_bytes);

// dweight[ids[i]] += dout[i] for i in order; dout (n, cols), dweight (V, cols).
template <class T>
void embedding_backward(const int32_t* ids, const T* dout, T* dweight, int64_t n, int64_t cols);

}  // namespace ft::cpu
