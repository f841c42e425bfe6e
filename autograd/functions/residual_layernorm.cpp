#include "autograd/functions/residual_layernorm.h"

#include "autograd/function.h"
#include "autograd/functions/layernorm.h"
#include "autograd/functions/linear_grads.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/residual_layernorm.h"

namespace ft::autograd {
namespace {

struct ResidualLayerNormBackward : Node {
  Tensor y, weight, mean, rstd;  // y (..., C), weight (C), mean and rstd (...)
  float p = 0.f;
  PhiloxState state;  // the forward's: replays its mask
  // Inputs (x, h, weight, bias[, h_bias]); outputs (y, z): either output gradient may be undefined
  // (zero).
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    const Tensor& gy = go[0];
    const bool h_bias = needs_grad.size() > 4 && needs_grad[4];
    if (!go[1].defined()) {  // z unused: the LayerNorm contributes nothing
      Tensor dh;
      if (needs_grad[1] || h_bias) dh = p > 0.f ? ops::dropout_backward(gy, p, state) : gy;
      std::vector<Tensor> out{needs_grad[0] ? gy : Tensor(), needs_grad[1] ? dh : Tensor(), Tensor(), Tensor()};
      if (needs_grad.size() > 4) out.push_back(h_bias ? linear_bias_grad(*this, 4, dh) : Tensor());
      return out;
    }
    const ops::LayerNormParamSinks into = param_sinks(*this, 2, y, weight.numel());
    // The bias's preset fp32 gradient (the arena) takes the backward's sums of dh where the kernel
    // can add into it; otherwise the sums come back in h_bias's dtype, as a linear layer's would.
    Tensor hb_sink = h_bias && sink_usable(y) ? direct_grad(*this, 4, {y.size(-1)}) : Tensor();
    if (hb_sink.defined() && !(hb_sink.is_contiguous() && hb_sink.device() == y.device())) hb_sink = Tensor();
    ops::ResidualLayerNormGrads g =
        ops::residual_layernorm_backward(gy, go[1], y, weight, mean, rstd, p, state, into, h_bias, hb_sink);
    std::vector<Tensor> out{needs_grad[0] ? g.dy : Tensor(), needs_grad[1] ? g.dh : Tensor(),
                            param_grad(*this, 2, into.dweight, g.dweight, weight.dtype()),
                            param_grad(*this, 3, into.dbias, g.dbias, weight.dtype())};
    if (needs_grad.size() > 4) out.push_back(h_bias ? param_grad(*this, 4, hb_sink, g.dh_bias, y.dtype()) : Tensor());
    return out;
  }
  void release() override { y = weight = mean = rstd = Tensor(); }
  const char* name() const override { return "ResidualLayerNormBackward"; }
};

}  // namespace

ResidualLayerNorm residual_layernorm(const Tensor& x, const Tensor& h, const Tensor& weight, const Tensor& bias,
                                     double eps, float p, PhiloxState state, const Tensor& h_bias) {
  ops::ResidualLayerNormOut out = ops::residual_layernorm_forward(x, h, weight, bias, eps, p, state, h_bias);
  std::vector<Tensor> inputs{x, h, weight, bias};
  if (h_bias.defined()) inputs.push_back(h_bias);
  if (needs_graph(inputs)) {
    auto node = std::make_shared<ResidualLayerNormBackward>();
    node->y = out.y.detach();  // an output: saving its handle would make a node -> y -> node cycle
    node->weight = weight.detach();
    node->mean = out.mean;
    node->rstd = out.rstd;
    node->p = p;
    node->state = state;
    record(node, inputs, {out.y, out.z});
  }
  return {out.y, out.z};
}

}  // namespace ft::autograd
