#include "autograd/functions/matmul.h"

#include "autograd/function.h"
#include "autograd/functions/linear_grads.h"
#include "ops/reduce.h"

namespace ft::autograd {
namespace {

// Sums the batch entries of a batched gradient of a matrix that was broadcast over the batch:
// g (..., R, C) -> (R, C).
Tensor sum_batches(const Tensor& g) {
  if (g.dim() == 2) return g;
  return ops::sum(g.reshape({-1, g.size(-2), g.size(-1)}), 0);
}


ops::MatmulOptions flags(bool trans_a, bool trans_b, float alpha) {
  ops::MatmulOptions o;
  o.trans_a = trans_a;
  o.trans_b = trans_b;
  o.alpha = alpha;
  return o;
}

// With C = alpha * op(A) op(B) + bias and upstream gradient G (shaped like C):
//   d op(A) = alpha * G op(B)^T      d op(B) = alpha * op(A)^T G      d bias = sum of G's rows
// and dA, dB are those, transposed back where the forward used a transpose. Every product
// below is one matmul call whose trans flags do the transposing.
struct MatmulBackward : Node {
  Tensor a, b;  // saved inputs
  bool trans_a = false, trans_b = false, has_bias = false;
  float alpha = 1.f;
  bool allow_tf32 = false;
  bool align_rows = false;  // the forward ran over the padded N (ops::align_rows_applies)

  std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) override {
    // batch + (M, N); padded rows (align_rows: the gradient keeps the output's layout) stay as
    // they are, since every product below takes a row stride.
    const Tensor g = rows_collapse(grad_outputs[0]) ? grad_outputs[0] : grad_outputs[0].contiguous();
    Tensor da, db, dbias;
    if (needs_grad[0] && align_rows) {
      // MatmulOptions::align_rows: dA = G B over the padded N (zero columns of G against the
      // zero rows of B), so that no operand's contiguous dimension is N.
      const int64_t n = g.size(-1);
      Shape padded = g.shape();
      padded.back() = ops::aligned_cols(n, g.dtype());
      const Tensor g_pad = Tensor::zeros(padded, g.dtype(), g.device());
      g_pad.slice(-1, 0, n).copy_(g);
      da = ops::matmul(g_pad, ops::pad_rows(b, padded.back()), with_tf32(flags(false, false, alpha)));
    } else if (needs_grad[0]) {
      // trans_a: dA = alpha * op(B) G^T (K, M); else dA = alpha * G op(B)^T (M, K).
      da = trans_a ? ops::matmul(b, g, with_tf32(flags(trans_b, true, alpha)))
                   : ops::matmul(g, b, with_tf32(flags(false, !trans_b, alpha)));
      if (a.dim() == 2) da = sum_batches(da);
    }
    if (needs_grad[1] && !grad_b_in_place(g)) db = grad_b(g);
    if (has_bias && needs_grad[2]) dbias = linear_bias_grad(*this, 2, g);
    return {da, db, dbias};
  }

  // A weight (b 2-D, a's rows running on) whose fp32 gradient buffer is preset: dB is one
  // product added into it with beta = 1 (autograd::direct_grad). False when that does not apply.
  bool grad_b_in_place(const Tensor& g) const {
    if (b.dim() != 2 || trans_a || !(a.dim() == 2 || rows_collapse(a) || a.is_contiguous())) return false;
    if (!sink_usable(a)) return false;
    const Tensor sink = direct_grad(*this, 1, b.shape());
    if (!sink.defined()) return false;
    const Tensor a2 = as_rows(a);  // (B*M, K)
    const Tensor g2 = as_rows(g);  // (B*M, N)
    if (trans_b) ops::matmul_out(g2, a2, sink, with_tf32(flags(true, false, alpha)), /*accumulate=*/true);
    else ops::matmul_out(a2, g2, sink, with_tf32(flags(true, false, alpha)), /*accumulate=*/true);
    mark_delivered(*this, 1);
    return true;
  }

  // trans_b: dB = alpha * G^T op(A) (N, K); else dB = alpha * op(A)^T G (K, N).
  Tensor grad_b(const Tensor& g) const {
    if (b.dim() == 2 && a.dim() > 2 && !trans_a) {
      // b was shared by every batch entry and a's rows run on: one product over all B*M rows
      // sums the batch entries' contributions inside the GEMM.
      const Tensor a2 = as_rows(a);  // (B*M, K)
      const Tensor g2 = as_rows(g);  // (B*M, N)
      return trans_b ? ops::matmul(g2, a2, with_tf32(flags(true, false, alpha)))
                     : ops::matmul(a2, g2, with_tf32(flags(true, false, alpha)));
    }
    Tensor db = trans_b ? ops::matmul(g, a, with_tf32(flags(true, trans_a, alpha)))
                        : ops::matmul(a, g, with_tf32(flags(!trans_a, false, alpha)));
    return b.dim() == 2 ? sum_batches(db) : db;
  }

  ops::MatmulOptions with_tf32(ops::MatmulOptions o) const {
    o.allow_tf32 = allow_tf32;
    return o;
  }

  void release() override { a = b = Tensor(); }
  const char* name() const override { return "MatmulBackward"; }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, const ops::MatmulOptions& opts) {
  Tensor y = ops::matmul(a, b, opts);
  const std::vector<Tensor> inputs = {a, b, opts.bias};
  if (needs_graph(inputs)) {
    auto node = std::make_shared<MatmulBackward>();
    node->a = a.detach();
    node->b = b.detach();
    node->trans_a = opts.trans_a;
    node->trans_b = opts.trans_b;
    node->has_bias = opts.bias.defined();
    node->alpha = opts.alpha;
    node->allow_tf32 = opts.allow_tf32;
    node->align_rows = ops::align_rows_applies(a, b, opts);
    record(node, inputs, {y});
  }
  return y;
}

}  // namespace ft::autograd
