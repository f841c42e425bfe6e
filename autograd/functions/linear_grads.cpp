#include "autograd/functions/linear_grads.h"

#include "autograd/function.h"
#include "ops/matmul.h"
#include "ops/reduce.h"

namespace ft::autograd {
namespace {

Tensor rows_of(const Tensor& t) { return rows_collapse(t) ? t.view({-1, t.size(-1)}) : t.reshape({-1, t.size(-1)}); }

// Whether an fp32 sink can take a gradient computed from `t`'s dtype on its device (the CPU
// reference of the half dtypes rounds through f32 copies and keeps the plain path).
bool sink_usable(const Tensor& t) { return t.dtype() == DType::F32 || (is_half(t.dtype()) && t.is_cuda()); }

}  // namespace

Tensor linear_weight_grad(const Node& node, size_t w_input, const Tensor& x, const Tensor& g) {
  const Tensor x2 = rows_of(x), g2 = rows_of(g);  // (M, K), (M, N)
  ops::MatmulOptions o;
  o.trans_a = true;  // g^T x
  const Tensor sink = sink_usable(x) ? direct_grad(node, w_input, {g2.size(1), x2.size(1)}) : Tensor();
  if (!sink.defined()) return ops::matmul(g2, x2, o);
  ops::matmul_out(g2, x2, sink, o, /*accumulate=*/true);
  mark_delivered(node, w_input);
  return Tensor();
}

Tensor linear_bias_grad(const Node& node, size_t b_input, const Tensor& g) {
  const Tensor sink = sink_usable(g) ? direct_grad(node, b_input, {g.size(-1)}) : Tensor();
  if (!sink.defined() || !rows_collapse(g)) return ops::sum(rows_of(g), 0);
  ops::sum_rows_into(g, sink);
  mark_delivered(node, b_input);
  return Tensor();
}

}  // namespace ft::autograd
