#include "autograd/functions/residual_layernorm.h"

#include "autograd/function.h"
#include "autograd/functions/layernorm.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/residual_layernorm.h"

namespace ft::autograd {
namespace {

struct ResidualLayerNormBackward : Node {
  Tensor y, weight, mean, rstd;  // y (..., C), weight (C), mean and rstd (...)
  float p = 0.f;
  PhiloxState state;  // the forward's: replays its mask
  // Inputs (x, h, weight, bias); outputs (y, z): either output gradient may be undefined (zero).
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    const Tensor& gy = go[0];
    if (!go[1].defined()) {  // z unused: the LayerNorm contributes nothing
      Tensor dh;
      if (needs_grad[1]) dh = p > 0.f ? ops::dropout_backward(gy, p, state) : gy;
      return {needs_grad[0] ? gy : Tensor(), dh, Tensor(), Tensor()};
    }
    const ops::LayerNormParamSinks into = param_sinks(*this, 2, y, weight.numel());
    ops::ResidualLayerNormGrads g = ops::residual_layernorm_backward(gy, go[1], y, weight, mean, rstd, p, state, into);
    return {needs_grad[0] ? g.dy : Tensor(), needs_grad[1] ? g.dh : Tensor(),
            param_grad(*this, 2, into.dweight, g.dweight, weight.dtype()),
            param_grad(*this, 3, into.dbias, g.dbias, weight.dtype())};
  }
  void release() override { y = weight = mean = rstd = Tensor(); }
  const char* name() const override { return "ResidualLayerNormBackward"; }
};

}  // namespace

ResidualLayerNorm residual_layernorm(const Tensor& x, const Tensor& h, const Tensor& weight, const Tensor& bias,
                                     double eps, float p, PhiloxState state) {
  ops::ResidualLayerNormOut out = ops::residual_layernorm_forward(x, h, weight, bias, eps, p, state);
  if (needs_graph({x, h, weight, bias})) {
    auto node = std::make_shared<ResidualLayerNormBackward>();
    node->y = out.y.detach();  // an output: saving its handle would make a node -> y -> node cycle
    node->weight = weight.detach();
    node->mean = out.mean;
    node->rstd = out.rstd;
    node->p = p;
    node->state = state;
    record(node, {x, h, weight, bias}, {out.y, out.z});
  }
  return {out.y, out.z};
}

}  // namespace ft::autograd
