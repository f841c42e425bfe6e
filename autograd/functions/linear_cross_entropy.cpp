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
    const HeadGrads g = head_backward_products(*this, x, w_used, full, vocab);
    return {g.dx, g.dw, Tensor()};
  }
  void release() override { x = w_used = full = targets = lse = Tensor(); }
  const char* name() const override { return "LinearCrossEntropyBackward"; }
};

}  // namespace

HeadProduct head_product(const char* op, const Tensor& x, const Tensor& w) {
  FT_CHECK_ARG(x.defined() && w.defined() && x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1), "[", op,
               "] x (..., C) and w (V, C) must agree on C, got x ",
               x.defined() ? str(x.shape()) : std::string("undefined"), " and w ",
               w.defined() ? str(w.shape()) : std::string("undefined"));
  FT_CHECK_ARG(x.dtype() == w.dtype() && x.device() == w.device(), "[", op, "] x is ", x.dtype(), " on ", x.device(),
               ", w is ", w.dtype(), " on ", w.device());
  FT_CHECK_ARG(rows_collapse(x) || x.dim() == 1, "[", op, "] x ", x.shape(), " with strides ", x.strides(),
               " is not a stack of rows: call .contiguous() first");
  const int64_t V = w.size(0);
  // On CUDA, logits rows padded to 16 bytes: see MatmulOptions::align_rows for why.
  const int64_t Vp = x.is_cuda() ? ops::aligned_cols(V, x.dtype()) : V;
  HeadProduct h;
  h.w_used = Vp == V ? w : ops::pad_rows(w, Vp);  // (Vp, C)
  ops::MatmulOptions o;
  o.trans_b = true;
  h.full = ops::matmul(x, h.w_used, o);                      // (..., Vp)
  h.logits = Vp == V ? h.full : h.full.slice(-1, 0, V);  // (..., V)
  return h;
}

HeadGrads head_backward_products(const Node& node, const Tensor& x, const Tensor& w_used, const Tensor& full,
                                 int64_t vocab, const Tensor& alpha_scale) {
  HeadGrads g;
  if (node.needs_grad[0]) {
    ops::MatmulOptions o;
    o.alpha_scale = alpha_scale;
    g.dx = ops::matmul(full, w_used, o);  // (..., Vp) (Vp, C): the padding adds zeros
  }
  // dw = dlogits^T x over the V real columns, (V, C); straight into a preset fp32 gradient when
  // there is one (the tied wte's arena view in training).
  if (node.needs_grad[1]) {
    const Tensor logits = full.size(-1) == vocab ? full : full.slice(-1, 0, vocab);  // (..., V)
    g.dw = linear_weight_grad(node, 1, x, logits, alpha_scale);
  }
  return g;
}

LinearCrossEntropyOut linear_cross_entropy(const Tensor& x, const Tensor& w, const Tensor& targets,
                                           int32_t ignore_index) {
  const HeadProduct h = head_product("linear_cross_entropy", x, w);
  ops::CrossEntropyOut ce = ops::cross_entropy_forward(h.logits, targets, ignore_index);
  if (needs_graph({x, w})) {
    auto node = std::make_shared<LinearCrossEntropyBackward>();
    node->x = x.detach();
    node->w_used = h.w_used.detach();
    node->full = h.full;
    node->targets = targets.detach();
    node->lse = ce.lse;
    node->vocab = w.size(0);
    node->ignore_index = ignore_index;
    record(node, {x, w, targets}, {ce.loss});
  }
  return {ce.loss, h.logits};
}

}  // namespace ft::autograd
