// GELU, tanh form: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), fused forward and
// backward. x and dy: any shape, bf16, f16 or f32 (f64 on the CPU); math in fp32 (f64 for f64);
// results in x's dtype and shape.
#pragma once

#include "core/tensor.h"

namespace ft::ops {

Tensor gelu_forward(const Tensor& x);
// dx = dy * gelu'(x); the backward needs x only (not y).
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

}  // namespace ft::ops
