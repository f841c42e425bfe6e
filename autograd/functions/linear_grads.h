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

// (prod(...), C) rows of t (..., C): a view when the rows collapse, else a contiguous copy.
Tensor as_rows(const Tensor& t);

// Whether a preset fp32 gradient can take a gradient computed in t's dtype on t's device in place
// (the CPU reference of the half dtypes rounds through f32 copies and keeps the plain path).
bool sink_usable(const Tensor& t);

// x (..., K) and g (..., N) stacks of rows; `w_input` is w's input index in `node`. On CUDA, an N
// that is not a multiple of 64 is two products, over the first N - N % 64 rows of dw and over the
// rest: for GPT-2's whole odd V = 50257 (the tied head) cuBLASLt picks a Turing-era kernel
// (2.62 ms on an H100 at M = 16384) where it runs its Hopper kernels for a multiple of 64 (1.66 ms
// for 50304 rows; bench/train/dev/epilogue_bench.cu). alpha_scale (optional, see
// MatmulOptions::alpha_scale) multiplies the gradient: g^T x times its value.
Tensor linear_weight_grad(const Node& node, size_t w_input, const Tensor& x, const Tensor& g,
                          const Tensor& alpha_scale = Tensor());
// out (N, K) = g2^T x2, or += (accumulate), times alpha_scale's value when given, for g2 (M, N) and
// x2 (M, K): linear_weight_grad's product (in its two parts on CUDA) into a given buffer.
void weight_product_into(const Tensor& g2, const Tensor& x2, const Tensor& out, bool accumulate,
                         const Tensor& alpha_scale = Tensor());
// g (..., N) a stack of rows; `b_input` is b's input index in `node`.
Tensor linear_bias_grad(const Node& node, size_t b_input, const Tensor& g);

}  // namespace ft::autograd
