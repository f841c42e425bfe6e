#include "autograd/functions/layernorm.h"

#include "autograd/function.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"

namespace ft::autograd {
namespace {

struct LayerNormBackward : Node {
  Tensor x, weight, mean, rstd;  // x (..., C), weight (C), mean and rstd (...)
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor(), Tensor()};
    ops::LayerNormGrads g = ops::layernorm_backward(go[0], x, weight, mean, rstd);
    return {needs_grad[0] ? g.dx : Tensor(), needs_grad[1] ? ops::cast(g.dweight, weight.dtype()) : Tensor(),
            needs_grad[2] ? ops::cast(g.dbias, weight.dtype()) : Tensor()};
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
