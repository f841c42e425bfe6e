// Differentiable elementwise arithmetic (see ops/elementwise.h for shapes and broadcasting).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, double alpha);
// Differentiable dtype change (the gradient is cast back to x's dtype).
Tensor cast(const Tensor& x, DType dtype);

}  // namespace ft::autograd
