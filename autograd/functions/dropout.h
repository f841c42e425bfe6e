// Differentiable dropout (see ops/dropout.h). The node keeps the PhiloxState and p, never a mask:
// backward regenerates the mask. The caller takes `state` from its Generator with
// gen.next(ops::kDropoutOffsets).
#pragma once

#include "core/philox.h"
#include "core/tensor.h"

namespace ft::autograd {

Tensor dropout(const Tensor& x, float p, PhiloxState state);

}  // namespace ft::autograd
