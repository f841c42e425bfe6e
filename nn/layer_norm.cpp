#include "nn/layer_norm.h"

#include "autograd/functions/layernorm.h"

namespace ft::nn {

LayerNorm::LayerNorm(int64_t dim, double eps) : eps_(eps) {
  register_parameter("weight", weight, Tensor::full({dim}, 1.0, DType::F32));
  register_parameter("bias", bias, Tensor::zeros({dim}, DType::F32));
}

Tensor LayerNorm::forward(const Tensor& x) const { return autograd::layernorm(x, weight, bias, eps_); }

}  // namespace ft::nn
