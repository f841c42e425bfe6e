#include "autograd/functions/linear_cross_entropy.h"

#include "autograd/function.h"
#include "autograd/functions/linear_grads.h"
#include "ops/cross_entropy.h"
#include "ops/matmul.h"

namespace ft::autograd {
namespace {

struct LinearCrossEntropyBackward : Node {
  Tensor x;        // (..., C)
  HeadWeights w;   // w in the products' two parts (see HeadWeights)
  Tensor full;     // (..., Vp): the logits buffer, padded rows; becomes dlogits
  Tensor targets;  // (...)
  Tensor lse;      // (...) fp32
  int64_t vocab = 0;
  int32_t ignore_index = -1;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor logits = full.size(-1) == vocab ? full : full.slice(-1, 0, vocab);  // (..., V)
    ops::cross_entropy_backward_(go[0], logits, targets, lse, ignore_index);      // full := dlogits, zero padding
    const HeadGrads g = head_backward_products(*this, x, w, full, vocab);
    return {g.dx, g.dw, Tensor()};
  }
  void release() override {
    x = full = targets = lse = Tensor();
    w = HeadWeights();
  }
  const char* name() const override { return "LinearCrossEntropyBackward"; }
};

}  // namespace

HeadWeights head_weights(const char* op, const Tensor& x, const Tensor& w, int64_t* padded_vocab) {
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
  *padded_vocab = Vp;
  HeadWeights h;
  if (Vp == V) {
    h.head = w;
    return h;
  }
  const int64_t Vm = V / 64 * 64;
  h.head = w.slice(0, 0, Vm);
  h.tail = ops::pad_rows(w.slice(0, Vm, V), Vp - Vm);  // (Vp - Vm, C): a few rows
  return h;
}

HeadProduct head_logits(const Tensor& x, const HeadWeights& w, int64_t vocab, int64_t padded_vocab) {
  HeadProduct h;
  h.w = w;
  ops::MatmulOptions o;
  o.trans_b = true;
  if (!w.tail.defined()) {
    h.full = ops::matmul(x, w.head, o);  // (..., V)
    h.logits = h.full;
    return h;
  }
  const int64_t Vm = w.head.size(0), Vp = padded_vocab;
  Shape shape = x.shape();
  shape.back() = Vp;
  h.full = Tensor::empty(shape, x.dtype(), x.device());  // (..., Vp)
  if (Vm > 0) ops::matmul_out(x, w.head, h.full.slice(-1, 0, Vm), o);
  ops::matmul_out(x, w.tail, h.full.slice(-1, Vm, Vp), o);  // the padded columns: x . 0 = 0
  h.logits = h.full.slice(-1, 0, vocab);                      // (..., V)
  return h;
}

HeadProduct head_product(const char* op, const Tensor& x, const Tensor& w) {
  int64_t Vp = 0;
  const HeadWeights hw = head_weights(op, x, w, &Vp);
  return head_logits(x, hw, w.size(0), Vp);
}

void head_dx_into(const Tensor& full, const HeadWeights& w, const Tensor& dx, const Tensor& alpha_scale) {
  ops::MatmulOptions o;
  o.alpha_scale = alpha_scale;
  if (!w.tail.defined()) {
    ops::matmul_out(full, w.head, dx, o);  // (..., V) (V, C)
    return;
  }
  // (..., Vm) (Vm, C), then + (..., Vp - Vm) (Vp - Vm, C): the padding's dlogits and rows are zero.
  const int64_t Vm = w.head.size(0), Vp = full.size(-1);
  if (Vm > 0) ops::matmul_out(full.slice(-1, 0, Vm), w.head, dx, o);
  ops::matmul_out(full.slice(-1, Vm, Vp), w.tail, dx, o, /*accumulate=*/Vm > 0);
}

HeadGrads head_backward_products(const Node& node, const Tensor& x, const HeadWeights& w, const Tensor& full,
                                 int64_t vocab, const Tensor& alpha_scale) {
  HeadGrads g;
  if (node.needs_grad[0]) {
    Shape shape = full.shape();
    shape.back() = w.head.size(1);
    g.dx = Tensor::empty(shape, full.dtype(), full.device());  // (..., C)
    head_dx_into(full, w, g.dx, alpha_scale);
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
    node->w = h.w.detached();
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
