// Differentiable matrix product (see ops/matmul.h for shapes, flags and layouts).
#pragma once

#include "core/tensor.h"
#include "ops/matmul.h"

namespace ft::autograd {

// alpha * op(a) op(b) + bias, with gradients for a, b and bias. (In-place accumulation,
// ops::matmul_out, has no gradient: it is for weight gradients themselves.)
Tensor matmul(const Tensor& a, const Tensor& b, const ops::MatmulOptions& opts = {});

}  // namespace ft::autograd
