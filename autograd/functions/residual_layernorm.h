// Differentiable residual add + dropout + LayerNorm (see ops/residual_layernorm.h):
//   y = x + dropout(h, p, state),  z = LayerNorm(y; weight, bias, eps).
// Both outputs carry gradients: y as the residual stream going on, z as the next sublayer's
// input. The node saves y (the LayerNorm's input; x itself is not needed), mean, rstd, weight, p
// and the PhiloxState -- never a mask. Its backward is one op: dy = gy + LayerNorm'(gz), dx = dy,
// dh = dropout_backward(dy), and the weight and bias gradients (fp32 sums, then weight's dtype,
// as autograd::layernorm gives them).
//
// With p > 0 the caller takes `state` from its Generator with gen.next(ops::kDropoutOffsets),
// exactly as for autograd::dropout; with p = 0 the state is not used.
//
// h_bias (optional): the branch's bias, left out by the layer that made h (nn::Block's output
// projections) and added here, y = x + dropout(h + h_bias) (ops/residual_layernorm.h). Its
// gradient, dh's column sums, comes from the same backward op: on CUDA added straight into the
// trainer's fp32 arena where that holds the bias's gradient (autograd::direct_grad).
#pragma once

#include "core/philox.h"
#include "core/tensor.h"

namespace ft::autograd {

struct ResidualLayerNorm {
  Tensor y;  // (..., C): x + dropout(h)
  Tensor z;  // (..., C): LayerNorm(y)
};

ResidualLayerNorm residual_layernorm(const Tensor& x, const Tensor& h, const Tensor& weight, const Tensor& bias,
                                     double eps, float p, PhiloxState state, const Tensor& h_bias = Tensor());

}  // namespace ft::autograd
