// The GPT head and its loss as one differentiable op: per-row cross-entropy of the logits x w^T
// (see ops/cross_entropy.h), with gradients for x and w.
//
// It computes what autograd::cross_entropy(autograd::matmul(x, w, {trans_b}), targets) does, but
// the logits buffer is also the gradient's: the backward writes dlogits over the logits in place
// (ops::cross_entropy_backward_), so a training step holds one (rows, V) buffer, not three. On CUDA
// the rows are padded to 16 bytes (MatmulOptions::align_rows; V = 50257 is odd) and both backward
// products run over the padded vocabulary against a zero-padded copy of w, as the padding of
// dlogits is zero: no operand has an odd contiguous dimension and nothing is copied.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::autograd {

struct LinearCrossEntropyOut {
  Tensor loss;    // (...) fp32 per-row losses, differentiable with respect to x and w
  // (..., V) x w^T, without a gradient of its own. Its memory becomes dlogits when backward runs
  // through `loss`: read the logits before that.
  Tensor logits;
};

// x (..., C) bf16/f16/f32 (f64 on the CPU); w (V, C) in x's dtype; targets (...) int32 (as in
// ops::cross_entropy_forward; ignore_index rows have loss 0 and no gradient).
LinearCrossEntropyOut linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets,
                                           int32_t ignore_index = -1);

}  // namespace ft::autograd
