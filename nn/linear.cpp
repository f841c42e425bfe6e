#include "nn/linear.h"

#include "autograd/functions/matmul.h"

namespace ft::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias) {
  register_parameter("weight", weight, Tensor::zeros({out_features, in_features}, DType::F32));
  if (with_bias) register_parameter("bias", bias, Tensor::zeros({out_features}, DType::F32));
}

Tensor Linear::forward(const Tensor& x) const {
  MatmulOptions o;
  o.trans_b = true;  // weight is stored (out, in)
  o.bias = bias;     // added by the matmul's epilogue; its gradient is the row sum of dy
  return autograd::matmul(x, weight, o);
}

Tensor Linear::forward_without_bias(const Tensor& x) const {
  MatmulOptions o;
  o.trans_b = true;
  return autograd::matmul(x, weight, o);
}

}  // namespace ft::nn
