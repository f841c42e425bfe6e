// y = x W^T + b, PyTorch's nn.Linear: weight (out, in), bias (out). x (..., in) -> y (..., out).
#pragma once

#include "nn/module.h"

namespace ft::nn {

class Linear : public Module {
 public:
  // Parameters start at zero (f32, CPU); init_gpt2_parameters or the caller fills them.
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const;
  // x W^T alone, for a caller that adds the bias itself (nn::Block: in the residual add's op).
  Tensor forward_without_bias(const Tensor& x) const;

  Tensor weight;  // (out, in)
  Tensor bias;    // (out), undefined without bias
};

}  // namespace ft::nn
