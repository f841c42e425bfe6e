#include "autograd/functions/linear_cross_entropy.h"

#include "autograd/function.h"
#include "ops/cross_entropy.h"
#include "ops/matmul.h"

namespace ft::autograd {
namespace {

// (prod(...), C) rows of a stack of rows (contiguous or padded): a view.
Tensor rows_of(const Tensor& t) { return t.view({-1, t.size(-1)}); }

struct LinearCrossEntropyBackward : Node {
  Tensor x;        // (..., C)
  Tensor w_used;   // (Vp, C): w, zero-padded to Vp rows on CUDA
  Tensor full;     // (..., Vp): the logits buffer, padded rows; becomes dlogits
  Tensor targets;  // (...)
  Tensor lse;      // (...) fp32
  int64_t vocab = 0;
  int32_t ignore_index = -1;

  // out (V, C) (+)= g2^T x2 for g2 (N, V), x2 (N, C). On CUDA as two products, over the first
  // V - V % 64 rows of out and over the rest: for the whole odd V = 50257 cuBLASLt picks a
  // Turing-era kernel (2.62 ms on an H100 at N = 16384) where it runs its Hopper kernels for a
  // multiple of 64 (1.66 ms for 50304 rows; .gpu micro-benchmark, session 10).
  static void grad_w_into(const Tensor& g2, const Tensor& x2, const Tensor& out, bool accumulate) {
    ops::MatmulOptions o;
    o.trans_a = true;
    const int64_t V = out.size(0), Vm = V / 64 * 64;
    if (!out.is_cuda() || Vm == 0 || Vm == V) {
      ops::matmul_out(g2, x2, out, o, accumulate);
      return;
    }
    ops::matmul_out(g2.slice(1, 0, Vm), x2, out.slice(0, 0, Vm), o, accumulate);
    ops::matmul_out(g2.slice(1, Vm, V), x2, out.slice(0, Vm, V), o, accumulate);
  }

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const Tensor logits = full.size(-1) == vocab ? full : full.slice(-1, 0, vocab);  // (..., V)
    ops::cross_entropy_backward_(go[0], logits, targets, lse, ignore_index);      // full := dlogits, zero padding
    Tensor dx, dw;
    if (needs_grad[0]) dx = ops::matmul(full, w_used);  // (..., Vp) (Vp, C): the padding adds zeros
    if (needs_grad[1]) {
      // dw = dlogits^T x over the V real columns, (V, C); straight into a preset fp32 gradient
      // when there is one (autograd::direct_grad: the tied wte's arena view in training).
      const Tensor g2 = rows_of(logits), x2 = rows_of(x);
      const Tensor sink = is_half(x.dtype()) && !x.is_cuda() ? Tensor() : direct_grad(*this, 1, {vocab, x.size(-1)});
      if (sink.defined()) {
        grad_w_into(g2, x2, sink, /*accumulate=*/true);
        mark_delivered(*this, 1);
      } else {
        dw = Tensor::empty({vocab, x.size(-1)}, x.dtype(), x.device());
        grad_w_into(g2, x2, dw, /*accumulate=*/false);
      }
    }
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
