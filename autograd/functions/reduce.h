// Differentiable sum and mean over one axis (see ops/reduce.h).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

Tensor sum(const Tensor& x, int axis, bool keepdim = false);
Tensor mean(const Tensor& x, int axis, bool keepdim = false);

}  // namespace ft::autograd
