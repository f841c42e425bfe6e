// Softmax over the last axis, fp32 math (f64 for f64). x: (..., C), bf16, f16 or f32 (f64 on the
// CPU); y and dx have x's shape and dtype.
#pragma once

#include "core/tensor.h"

namespace ft::ops {

Tensor softmax_forward(const Tensor& x);
// dx = y * (dy - rowsum(dy * y)); needs the forward's output y, not x.
Tensor softmax_backward(const Tensor& dy, const Tensor& y);

}  // namespace ft::ops
