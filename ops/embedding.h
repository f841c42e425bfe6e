// Embedding lookup: a gather forward and a scatter-add backward.
//
// ids: any shape (...), int32 (i64 and u16 are accepted and converted); weight (V, C) in bf16,
// f16 or f32 (f64 on the CPU). The forward returns (..., C) in weight's dtype. The backward sums
// dout rows into an fp32 (V, C) gradient (f64 for f64 dout), whatever dout's dtype.
//
// Ids outside [0, V) throw on the CPU; on CUDA they are not checked (that would cost a device
// sync per call): the forward writes a NaN row, so the loss turns non-finite, and the backward
// skips them. The CUDA backward is deterministic (sort-based, no atomics).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::ops {

Tensor embedding_forward(const Tensor& ids, const Tensor& weight);

// A new (num_embeddings, C) gradient: zeros plus the scatter-add of dout (..., C) by ids (...).
Tensor embedding_backward(const Tensor& dout, const Tensor& ids, int64_t num_embeddings);

// dweight[ids[i]] += dout[i] into an existing contiguous (V, C) fp32 (f64) gradient, e.g. a view
// into the gradient arena, so tied weights accumulate without a temporary.
void embedding_backward_(const Tensor& dweight, const Tensor& dout, const Tensor& ids);

}  // namespace ft::ops
