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
// The GPT head (autograd::linear_cross_entropy) then multiplies dlogits over the padded
// vocabulary as it lies in the logits' buffer: no second (rows, V) buffer, no copy.
// The logits must be a stack of rows (contiguous, or the first V columns of padded rows).
void cross_entropy_backward_(const Tensor& dloss, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                             int32_t ignore_index = -1);

// The forward and the in-place backward at once, for a gradient known before the backward runs
// (the training step's mean loss: autograd::linear_cross_entropy_mean). Returns the per-row losses
// (as cross_entropy_forward's) and overwrites the logits with
//   dlogits = (softmax(logits) - onehot(target)) * grad_scale * row_scale
// (ignored rows zero; on CUDA the padding of every row zeroed, as cross_entropy_backward_ does).
// grad_scale: undefined (1) or one element of the loss's dtype on the logits' device, read where it
// lives when the op runs -- on CUDA by the kernel, so there is no host read and a captured CUDA
// graph reads its value at every replay; row_scale: a host constant (the mean's 1 / rows).
// On CUDA one kernel reads each row from memory once and writes it once (a second read of the
// row hits L2; ops/cuda/cross_entropy.cu); the CPU runs the reference forward, then backward.
Tensor cross_entropy_loss_and_grad_(const Tensor& logits, const Tensor& targets, const Tensor& grad_scale,
                                    double row_scale, int32_t ignore_index = -1);

// a / b for two one-element tensors of one dtype (f32; f32 or f64 on the CPU) on one device,
// computed there: the factor by which the head's backward products rescale dlogits that were
// made for a gradient of b when the actual one is a. Shape (1).
Tensor scalar_ratio(const Tensor& a, const Tensor& b);

}  // namespace ft::ops
