// ReLU, forward and backward: relu(x) = max(x, 0); the backward passes dy where x > 0 (the
// subgradient at 0 is taken as 0, as PyTorch does). x and dy: any shape, bf16, f16 or f32 (f64 on
// the CPU); results in x's dtype and shape, exact in every dtype (no rounding happens).
#pragma once

#include "core/tensor.h"

namespace ft::ops {

Tensor relu_forward(const Tensor& x);
// dx = dy * (x > 0); the backward needs x only.
Tensor relu_backward(const Tensor& dy, const Tensor& x);

}  // namespace ft::ops
