// Differentiable ReLU (see ops/relu.h).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

Tensor relu(const Tensor& x);

}  // namespace ft::autograd
