#include "autograd/functions/layernorm.h"

#include "autograd/function.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"

namespace ft::autograd {

ops::LayerNormParamSinks param_sinks(const Node& node, size_t w_input, const Tensor& x, int64_t C) {
  ops::LayerNormParamSinks into;
  if (x.dtype() == DType::F64) return into;  // f64 sums stay f64
  auto usable = [&](const Tensor& t) { return t.defined() && t.is_contiguous() && t.device() == x.device() ? t : Tensor(); };
  if (node.needs_grad[w_input]) into.dweight = usable(direct_grad(node, w_input, {C}));
  if (node.needs_grad[w_input + 1]) into.dbias = usable(direct_grad(node, w_input + 1, {C}));
  return into;
}

Tensor param_grad(const Node& node, size_t input, const Tensor& sink, const Tensor& sum, DType param_dtype) {
  if (!node.needs_grad[input]) return Tensor();
  if (sink.defined()) {
    mark_delivered(node, input);
    return Tensor();
  }
  return ops::cast(sum, param_dtype);
}

namespace {

struct LayerNormBackward : Node {
  Tensor x, weight, mean, rstd;  // x (..., C), weight (C), mean and rstd (...)
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor(), Tensor()};
    const ops::LayerNormParamSinks into = param_sinks(*this, 1, x, weight.numel());
    ops::LayerNormGrads g = ops::layernorm_backward(go[0], x, weight, mean, rstd, into);
    return {needs_grad[0] ? g.dx : Tensor(), param_grad(*this, 1, into.dweight, g.dweight, weight.dtype()),
            param_grad(*this, 2, into.dbias, g.dbias, weight.dtype())};
  }
  void release() override { x = weight = mean = rstd = Tensor(); }
  const char* name() const override { return "LayerNormBackward"; }
};

}  // namespace

Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  ops::LayerNormOut out = ops::layernorm_forward(x, weight, bias, eps);
  if (needs_graph({x, weight, bias})) {
    auto node = std::make_shared<LayerNormBackward>();
    node->x = x.detach();
    node->weight = weight.detach();
    node->mean = out.mean;
    node->rstd = out.rstd;
    record(node, {x, weight, bias}, {out.y});
  }
  return out.y;
}

}  // namespace ft::autograd
