// The GPT head and its loss as one differentiable op: per-row cross-entropy of the logits x w^T
// (see ops/cross_entropy.h), with gradients for x and w.
//
// It computes what autograd::cross_entropy(autograd::matmul(x, w, {trans_b}), targets) does, but
// the logits buffer is also the gradient's: the backward writes dlogits over the logits in place
// (ops::cross_entropy_backward_), so a training step holds one (rows, V) buffer, not three. On CUDA
// the rows are padded to 16 bytes (MatmulOptions::align_rows; V = 50257 is odd). The products then
// run in two parts: w's first Vm = V rounded down to 64 rows in place, and its last V - Vm rows in
// a small zero-padded copy (HeadWeights::tail: 24 rows for GPT-2's vocabulary) that makes the
// padded columns, and their zero dlogits' share of dx, exact zeros. No operand has an odd
// contiguous dimension, and no (Vp, C) copy of w is made (77 MB for GPT-2-small in bf16).
#pragma once

#include <cstdint>

#include "autograd/node.h"
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

// ---- Shared with linear_cross_entropy_mean (autograd/functions/linear_cross_entropy_mean.h) ----

// w as the head's products use it: `head`, w's first rows (a view of w; all of w when no padding
// is needed), and `tail`, the rest of w's rows followed by zero rows up to Vp (a copy; undefined
// when head is all of w). Vm = head's rows is a multiple of 64 (cuBLASLt's fast tiles).
struct HeadWeights {
  Tensor head;  // (Vm, C)
  Tensor tail;  // (Vp - Vm, C) or undefined
  // Both parts detached from the graph (what a backward node keeps).
  HeadWeights detached() const { return {head.detach(), tail.defined() ? tail.detach() : Tensor()}; }
};

// The head's product: x and w validated (`op` names the caller), the (..., Vp) logits buffer
// (Vp = V rounded up to 16 bytes on CUDA, its extra columns zero) and its (..., V) view.
struct HeadProduct {
  HeadWeights w;
  Tensor full;    // (..., Vp)
  Tensor logits;  // (..., V)
};
HeadProduct head_product(const char* op, const Tensor& x, const Tensor& w);
// head_product in two steps, so that several stacks of rows share one HeadWeights: x and w
// validated and w split (*padded_vocab := Vp), then the logits of x's rows.
HeadWeights head_weights(const char* op, const Tensor& x, const Tensor& w, int64_t* padded_vocab);
HeadProduct head_logits(const Tensor& x, const HeadWeights& w, int64_t vocab, int64_t padded_vocab);
// dx = dlogits w from dlogits in `full` (..., Vp), padding zero, into dx (..., C) (overwritten),
// times alpha_scale's value when given.
void head_dx_into(const Tensor& full, const HeadWeights& w, const Tensor& dx, const Tensor& alpha_scale = Tensor());

// The head's backward products from dlogits lying in the logits' buffer `full` (..., Vp), padding
// zero: dx = dlogits w (over the padded vocabulary, in HeadWeights' two parts, the tail's added
// into the head's) and dw = dlogits^T x over the V real columns,
// the latter straight into a preset fp32 gradient when there is one (then undefined; see
// linear_weight_grad). Each only where node.needs_grad says so (inputs 0 and 1 are x and w);
// both times alpha_scale's value when it is given (MatmulOptions::alpha_scale).
struct HeadGrads {
  Tensor dx, dw;
};
HeadGrads head_backward_products(const Node& node, const Tensor& x, const HeadWeights& w, const Tensor& full,
                                 int64_t vocab, const Tensor& alpha_scale = Tensor());

}  // namespace ft::autograd
