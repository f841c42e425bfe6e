// Differentiable layernorm over the last axis (see ops/layernorm.h for shapes and dtypes).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

// y = (x - mean) / sqrt(var + eps) * weight + bias, with gradients for x, weight and bias.
// The gradients of weight and bias are summed over all rows in fp32 and then take weight's dtype
// (the engine adds gradients of one tensor in its own dtype); ops::layernorm_backward gives the
// fp32 sums directly to callers that want them.
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

}  // namespace ft::autograd
