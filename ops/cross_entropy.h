// Cross-entropy fused with log-softmax over the vocabulary.
//
// logits (..., V) in bf16, f16 or f32 (f64 on the CPU); targets with logits' shape minus the last
// axis, int32 (i64 and u16 are accepted and converted). Math is fp32 (f64 for f64 logits).
// The forward returns per-row losses and log-sum-exps in fp32 (f64); the backward recomputes
// softmax from the logits and the saved lse, so no second (rows, V) buffer ever exists -- it reads
// the logits once and writes dlogits once, in the logits' dtype.
//
// Rows whose target equals ignore_index have loss 0 and a zero gradient. A target outside
// [0, V) throws on the CPU; on CUDA it is not checked (that would cost a device sync per call):
// the row's loss is NaN, which the trainer's non-finite-loss check reports.
// Reduction (e.g. the mean over non-ignored rows) is the caller's.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::ops {

struct CrossEntropyOut {
  Tensor loss;  // (...), fp32 (f64 for f64 logits): lse - logits[target]
  Tensor lse;   // (...), log(sum(exp(logits))) per row; what the backward needs
};

CrossEntropyOut cross_entropy_forward(const Tensor& logits, const Tensor& targets, int32_t ignore_index = -1);

// dlogits = (softmax(logits) - onehot(target)) * dloss[row]; dloss has the loss's shape and dtype.
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              int32_t ignore_index = -1);

// The same gradient written over the logits themselves, which are not read again; on CUDA the
// padding of every row (columns [V, row stride), MatmulOptions::align_rows) is set to zero too.
// The GPT head's loss (autograd::linear_cross_entropy_mean) then multiplies dlogits over the
// padded vocabulary as it lies in the logits' buffer: no second (rows, V) buffer, no copy.
// The logits must be a stack of rows (contiguous, or the first V columns of padded rows).
void cross_entropy_backward_(const Tensor& dloss, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                             int32_t ignore_index = -1);

}  // namespace ft::ops
