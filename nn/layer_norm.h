// LayerNorm over the last axis with a gain and a bias, both (C).
#pragma once

#include "autograd/functions/residual_layernorm.h"
#include "nn/dropout.h"
#include "nn/module.h"

namespace ft::nn {

class LayerNorm : public Module {
 public:
  // weight 1, bias 0 (f32, CPU). fp32_params: they stay fp32 when the model is cast to bf16 / f16
  // (Module::to), and the LayerNorm ops read them so under half activations.
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool fp32_params = false);
  Tensor forward(const Tensor& x) const;
  // The residual add before this LayerNorm fused with it: y = x + drop(branch + branch_bias),
  // z = this(y); branch_bias (optional) is the bias the branch's last projection left out.
  // `drop` draws its state here (Dropout::draw), so the caller computes `branch` first and the
  // generator is consumed in the unfused model's order.
  autograd::ResidualLayerNorm forward_residual(const Tensor& x, const Tensor& branch, const Dropout& drop,
                                               const Tensor& branch_bias = Tensor()) const;

  Tensor weight;  // (C)
  Tensor bias;    // (C)

 private:
  double eps_;
};

}  // namespace ft::nn
