#include "nn/mlp.h"

#include "autograd/functions/gelu_mlp.h"
#include "autograd/functions/relu.h"

namespace ft::nn {

MLP::MLP(const GPTConfig& cfg) : c_fc(cfg.d_model, cfg.d_ff), c_proj(cfg.d_ff, cfg.d_model), activation_(cfg.activation) {
  register_module("c_fc", c_fc);
  register_module("c_proj", c_proj);
}

Tensor MLP::forward(const Tensor& x) const { return run(x, true); }

Tensor MLP::forward_without_proj_bias(const Tensor& x) const { return run(x, false); }

Tensor MLP::run(const Tensor& x, bool proj_bias) const {
  // GELU: one op for the whole block, with the GELU in the products' epilogues on CUDA.
  if (activation_ == MlpActivation::Gelu)
    return autograd::gelu_mlp(x, c_fc.weight, c_fc.bias, c_proj.weight, proj_bias ? c_proj.bias : Tensor());
  const Tensor a = autograd::relu(c_fc.forward(x));                      // (B, T, d_ff)
  return proj_bias ? c_proj.forward(a) : c_proj.forward_without_bias(a);  // (B, T, C)
}

}  // namespace ft::nn
