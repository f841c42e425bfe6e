// Differentiable multi-head self-attention on a fused qkv buffer (see ops/attention.h).
//
// qkv (B, T, 3C) is the output of the QKV linear layer: columns [q | k | v], each C = H * D wide,
// head h owning columns h*D .. h*D+D-1 of its part. q, k, v are taken as strided (B, T, H, D)
// views of it (no copies); the result is the attention output viewed as (B, T, C).
//
// The node saves qkv, out, lse and the options (with their PhiloxState): never a mask, and for
// flash never P -- the backward recomputes P tile by tile and regenerates the dropout mask. Naive
// attention on CUDA additionally keeps its (B, H, T, T) P, which its backward kernel reads: that
// is what the unfused baseline costs. The backward writes dq, dk, dv straight into the three
// slices of one dqkv (B, T, 3C) buffer, so no concatenation follows.
//
// Determinism: opts (saved whole in the node) carries opts.deterministic to the flash backward.
// Dropout: with opts.dropout_p > 0 the caller draws opts.philox from its Generator with
// gen.next(ops::attention_philox_offsets(B, H)).
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"

namespace ft::autograd {

Tensor attention(const Tensor& qkv, int n_heads, const ops::AttentionOptions& opts, bool use_flash = true);

}  // namespace ft::autograd
