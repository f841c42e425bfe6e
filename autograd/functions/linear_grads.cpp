#include "autograd/functions/linear_grads.h"

#include "autograd/function.h"
#include "ops/matmul.h"
#include "ops/reduce.h"

namespace ft::autograd {

// The split of linear_weight_grad's header.
void weight_product_into(const Tensor& g2, const Tensor& x2, const Tensor& out, bool accumulate,
                         const Tensor& alpha_scale) {
  ops::MatmulOptions o;
  o.trans_a = true;
  o.alpha_scale = alpha_scale;
  const int64_t N = out.size(0), Nm = N / 64 * 64;
  if (!out.is_cuda() || Nm == 0 || Nm == N) {
    ops::matmul_out(g2, x2, out, o, accumulate);
    return;
  }
  ops::matmul_out(g2.slice(1, 0, Nm), x2, out.slice(0, 0, Nm), o, accumulate);
  ops::matmul_out(g2.slice(1, Nm, N), x2, out.slice(0, Nm, N), o, accumulate);
}

Tensor as_rows(const Tensor& t) { return rows_collapse(t) ? t.view({-1, t.size(-1)}) : t.reshape({-1, t.size(-1)}); }

bool sink_usable(const Tensor& t) { return t.dtype() == DType::F32 || (is_half(t.dtype()) && t.is_cuda()); }

Tensor linear_weight_grad(const Node& node, size_t w_input, const Tensor& x, const Tensor& g,
                          const Tensor& alpha_scale) {
  const Tensor x2 = as_rows(x), g2 = as_rows(g);  // (M, K), (M, N)
  const Shape shape = {g2.size(1), x2.size(1)};   // (N, K)
  const Tensor sink = sink_usable(x) ? direct_grad(node, w_input, shape) : Tensor();
  if (sink.defined()) {
    weight_product_into(g2, x2, sink, /*accumulate=*/true, alpha_scale);
    mark_delivered(node, w_input);
    return Tensor();
  }
  Tensor dw = Tensor::empty(shape, x.dtype(), x.device());
  weight_product_into(g2, x2, dw, /*accumulate=*/false, alpha_scale);
  return dw;
}

Tensor linear_bias_grad(const Node& node, size_t b_input, const Tensor& g) {
  const Tensor sink = sink_usable(g) ? direct_grad(node, b_input, {g.size(-1)}) : Tensor();
  if (!sink.defined() || !rows_collapse(g)) return ops::sum(as_rows(g), 0);
  ops::sum_rows_into(g, sink);
  mark_delivered(node, b_input);
  return Tensor();
}

}  // namespace ft::autograd
