// Differentiable embedding lookup (see ops/embedding.h).
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

// weight[ids]: (...) ids into (V, C) weight give (..., C), with a gradient for weight. The
// scatter-add sums in fp32; the gradient then takes weight's dtype (the engine adds gradients of
// one tensor in its own dtype). ops::embedding_backward_ accumulates the fp32 sums directly.
Tensor embedding(const Tensor& ids, const Tensor& weight);

}  // namespace ft::autograd
