#include "nn/mlp.h"

#include "autograd/functions/gelu.h"
#include "autograd/functions/relu.h"

namespace ft::nn {

MLP::MLP(const GPTConfig& cfg) : c_fc(cfg.d_model, cfg.d_ff), c_proj(cfg.d_ff, cfg.d_model), activation_(cfg.activation) {
  register_module("c_fc", c_fc);
  register_module("c_proj", c_proj);
}

Tensor MLP::forward(const Tensor& x) const {
  const Tensor a = c_fc.forward(x);  // (B, T, d_ff)
  const Tensor h = activation_ == MlpActivation::Relu ? autograd::relu(a) : autograd::gelu(a);
  return c_proj.forward(h);  // (B, T, C)
}

}  // namespace ft::nn
