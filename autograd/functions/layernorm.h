// Differentiable layernorm over the last axis (see ops/layernorm.h for shapes and dtypes).
#pragma once

#include "autograd/node.h"
#include "core/tensor.h"
#include "ops/layernorm.h"

namespace ft::autograd {

// y = (x - mean) / sqrt(var + eps) * weight + bias, with gradients for x, weight and bias.
// The gradients of weight and bias are summed over all rows in fp32. Where the parameter's
// gradient is preset in fp32 (the trainer's arena, autograd::direct_grad) the sums are added there
// by the backward's own summing kernel; otherwise they take weight's dtype (the engine adds
// gradients of one tensor in its own dtype). ops::layernorm_backward gives the fp32 sums directly.
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// Shared with residual_layernorm's node, whose inputs w_input and w_input + 1 are also the
// LayerNorm's weight and bias: the preset fp32 gradients to add the sums into (none for f64 x),
// and then each input's gradient to return -- none when its sink took it (marked delivered),
// else the fp32 sum in the parameter's dtype.
ops::LayerNormParamSinks param_sinks(const Node& node, size_t w_input, const Tensor& x, int64_t C);
Tensor param_grad(const Node& node, size_t input, const Tensor& sink, const Tensor& sum, DType param_dtype);

}  // namespace ft::autograd
