// Differentiable GELU, tanh form (see ops/gelu.h).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

Tensor gelu(const Tensor& x);

}  // namespace ft::autograd
