// Reference kernels of the residual add fused with LayerNorm (see ops/residual_layernorm.h),
// written as the unfused ops compose: dropout, rounding, add, rounding, then the reference
// LayerNorm of ops/cpu/layernorm.h. Contiguous (rows, cols) buffers, T = float or double; half
// tensors arrive widened to float, and `storage` (their dtype) says where the unfused ops would
// round between steps.
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "core/dtype.h"

namespace ft::cpu {

// y = round(x + round(dropout(h))), then z, mean, rstd = layernorm(y). Without `dropout`, h is
// added unchanged.
template <class T>
void residual_layernorm_forward(const T* x, const T* h, const T* w, const T* b, T* y, T* z, T* mean, T* rstd,
                                int64_t rows, int64_t cols, double eps, const DropoutParams& d, bool dropout,
                                DType storage);

// dy = round(gy + round(layernorm_backward(gz))) (gy may be null: zero); dh = dropout(dy) with the
// forward's mask when `dropout` (dh unwritten otherwise); dweight, dbias overwritten with sums over
// all rows.
template <class T>
void residual_layernorm_backward(const T* gy, const T* gz, const T* y, const T* w, const T* mean, const T* rstd,
                                 T* dy, T* dh, T* dweight, T* dbias, int64_t rows, int64_t cols,
                                 const DropoutParams& d, bool dropout, DType storage);

}  // namespace ft::cpu
