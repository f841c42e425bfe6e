// Differentiable multi-head self-attention on a fused qkv buffer (see ops/attention.h), with
// grouped-query attention (n_kv_heads < n_heads K/V heads, each shared by n_heads / n_kv_heads
// query heads; n_kv_heads = 1 is multi-query attention).
//
// qkv (B, T, (H + 2 H_kv) D) is the output of the QKV linear layer: columns [q | k | v], q H * D
// wide, k and v H_kv * D wide each, head h owning columns h*D .. h*D+D-1 of its part (with H_kv = H
// this is GPT-2's (B, T, 3C)). q, k, v are taken as strided (B, T, H, D) and (B, T, H_kv, D) views
// of it (no copies); the result is the attention output viewed as (B, T, H D).
//
// The node saves qkv, out, lse and the options (with their PhiloxState): never a mask, and for
// flash never P -- the backward recomputes P tile by tile and regenerates the dropout mask. Naive
// attention on CUDA additionally keeps its (B, H, T, T) P, which its backward kernel reads: that
// is what the unfused baseline costs. The backward writes dq, dk, dv straight into the three
// slices of one dqkv buffer shaped like qkv, so no concatenation follows.
//
// Determinism: opts (saved whole in the node) carries opts.deterministic to the flash backward.
// Dropout: with opts.dropout_p > 0 the caller draws opts.philox from its Generator with
// gen.next(ops::attention_philox_offsets(B, H)) (H: query heads).
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"

namespace ft::autograd {

// n_kv_heads 0 means n_heads (multi-head attention).
Tensor attention(const Tensor& qkv, int n_heads, const ops::AttentionOptions& opts, bool use_flash = true,
                 int n_kv_heads = 0);

}  // namespace ft::autograd
