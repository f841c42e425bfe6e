#include "nn/layer_norm.h"

#include "autograd/functions/layernorm.h"

namespace ft::nn {

LayerNorm::LayerNorm(int64_t dim, double eps, bool fp32_params) : eps_(eps) {
  register_parameter("weight", weight, Tensor::full({dim}, 1.0, DType::F32), fp32_params);
  register_parameter("bias", bias, Tensor::zeros({dim}, DType::F32), fp32_params);
}

Tensor LayerNorm::forward(const Tensor& x) const { return autograd::layernorm(x, weight, bias, eps_); }

autograd::ResidualLayerNorm LayerNorm::forward_residual(const Tensor& x, const Tensor& branch, const Dropout& drop,
                                                        const Tensor& branch_bias) const {
  const Dropout::Draw d = drop.draw();
  return autograd::residual_layernorm(x, branch, weight, bias, eps_, d.p, d.state, branch_bias);
}

}  // namespace ft::nn
