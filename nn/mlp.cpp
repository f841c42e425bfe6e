#include "nn/mlp.h"

#include "autograd/functions/gelu.h"

namespace ft::nn {

MLP::MLP(const GPTConfig& cfg) : c_fc(cfg.d_model, cfg.d_ff), c_proj(cfg.d_ff, cfg.d_model), activation_(cfg.activation) {
  // ReLU has no differentiable op yet (ops/ and autograd/ provide gelu only); refuse at build
  // time rather than silently training a different model.
  FT_CHECK_ARG(activation_ == MlpActivation::Gelu, "[mlp] activation relu is not available yet: there is no "
                                                   "relu op in ops/ and autograd/; use gelu");
  register_module("c_fc", c_fc);
  register_module("c_proj", c_proj);
}

Tensor MLP::forward(const Tensor& x) const {
  const Tensor h = autograd::gelu(c_fc.forward(x));  // (B, T, d_ff)
  return c_proj.forward(h);                          // (B, T, C)
}

}  // namespace ft::nn
