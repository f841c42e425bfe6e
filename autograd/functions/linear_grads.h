// The parameter gradients of a linear layer y = x w^T + b inside a backward node, given
// g = dL/dy: dw = g^T x (N, K) and db = the column sums of g (N). Where the node's input is a leaf
// with a preset fp32 gradient (autograd::direct_grad: the trainer's arena), the gradient is added
// there in place (one product with beta = 1, one fp32 column sum) and an undefined tensor comes
// back; otherwise the gradient itself, in g's dtype, for the engine to deliver.
#pragma once

#include <cstddef>

#include "autograd/node.h"
#include "core/tensor.h"

namespace ft::autograd {

// x (..., K) and g (..., N) stacks of rows; `w_input` is w's input index in `node`.
Tensor linear_weight_grad(const Node& node, size_t w_input, const Tensor& x, const Tensor& g);
// g (..., N) a stack of rows; `b_input` is b's input index in `node`.
Tensor linear_bias_grad(const Node& node, size_t b_input, const Tensor& g);

}  // namespace ft::autograd
