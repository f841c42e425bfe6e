#include "autograd/functions/linear_cross_entropy.h"

#include "autograd/function.h"
#include "autograd/functions/linear_grads.h"
#include "ops/cross_entropy.h"
#include "ops/matmul.h"

namespace ft::autograd {
namespace {

struct LinearCrossEntropyBackward : Node {
  Tensor x;        // (..., C)
  Tensor w_used;   // (Vp, C): w, zero-padded to Vp rows on CUDA
  Tensor full;     // (..., Vp): the logits buffer, padded rows; becomes dlogits
  Tensor targets;  // (...)
  Tensor lse;      // (...) fp32
  int64_t vocab = 0;
  int32_t ignore_index = -1;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor logits = full.size(-1) == vocab ? full : full.slice(-1, 0, vocab);  // (..., V)
    ops::cross_entropy_backward_(go[0], logits, targets, lse, ignore_index);      // full := dlogits, zero padding
    Tensor dx, dw;
    if (needs_grad[0]) dx = ops::matmul(full, w_used);  // (..., Vp) (Vp, C): the padding adds zeros
    // dw = dlogits^T x over the V real columns, (V, C); straight into a preset fp32 gradient when
    // there is one (the tied wte's arena view in training).
    if (needs_grad[1]) dw = linear_weight_grad(*this, 1, x, logits);
    return {dx, dw, Tensor()};
  }
  void release() override { x = w_used = full = targets = lse = Tensor(); }
  const char* name() const override { return "LinearCrossEntropyBackward"; }
};

}  // namespace

LinearCrossEntropyOut linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets,
                                           int32_t ignore_index) {
  FT_CHECK_ARG(x.defined() && w.defined() && x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1),
               "[linear_cross_entropy] x (..., C) and w (V, C) must agree on C, got x ",
               x.defined() ? str(x.shape()) : std::string("undefined"), " and w ",
               w.defined() ? str(w.shape()) : std::string("undefined"));
  FT_CHECK_ARG(x.dtype() == w.dtype() && x.device() == w.device(), "[linear_cross_entropy] x is ", x.dtype(), " on ",
               x.device(), ", w is ", w.dtype(), " on ", w.device());
  FT_CHECK_ARG(rows_collapse(x) || x.dim() == 1, "[linear_cross_entropy] x ", x.shape(), " with strides ", x.strides(),
               " is not a stack of rows: call .contiguous() first");
  const int64_t V = w.size(0);
  // On CUDA, logits rows padded to 16 bytes: see MatmulOptions::align_rows for why.
  const int64_t Vp = x.is_cuda() ? ops::aligned_cols(V, x.dtype()) : V;
  const Tensor w_used = Vp == V ? w : ops::pad_rows(w, Vp);  // (Vp, C)
  ops::MatmulOptions o;
  o.trans_b = true;
  const Tensor full = ops::matmul(x, w_used, o);                 // (..., Vp)
  const Tensor logits = Vp == V ? full : full.slice(-1, 0, V);  // (..., V)
  ops::CrossEntropyOut ce = ops::cross_entropy_forward(logits, targets, ignore_index);
  if (needs_graph({x, w})) {
    auto node = std::make_shared<LinearCrossEntropyBackward>();
    node->x = x.detach();
    node->w_used = w_used.detach();
    node->full = full;
    node->targets = targets.detach();
    node->lse = ce.lse;
    node->vocab = V;
    node->ignore_index = ignore_index;
    record(node, {x, w, targets}, {ce.loss});
  }
  return {ce.loss, logits};
}

}  // namespace ft::autograd
