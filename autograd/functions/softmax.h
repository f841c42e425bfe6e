// Differentiable softmax over the last axis (see ops/softmax.h).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

Tensor softmax(const Tensor& x);

}  // namespace ft::autograd
