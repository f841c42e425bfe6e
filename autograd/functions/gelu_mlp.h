// The GPT-2 feed-forward block as one differentiable op:
//   y = gelu(x w_fc^T + b_fc) w_proj^T + b_proj        (GELU: tanh form, ops/gelu.h)
// with gradients for x and the four parameters. One node, so that the GELU derivative can run in
// the epilogue of c_proj's dx product (ops::matmul_dgelu) and GELU itself in c_fc's
// (ops::linear_gelu): on CUDA no pass over the (rows, d_ff) activations is left besides the
// products. Saves x, pre = x w_fc^T + b_fc and h = gelu(pre), as the unfused layers would.
#pragma once

#include "core/tensor.h"

namespace ft::autograd {

// x (..., C) a stack of rows; w_fc (F, C), b_fc (F), w_proj (C', F), b_proj (C'); biases may be
// undefined; everything in x's dtype. Returns (..., C').
Tensor gelu_mlp(const Tensor& x, const Tensor& w_fc, const Tensor& b_fc, const Tensor& w_proj, const Tensor& b_proj);

}  // namespace ft::autograd
