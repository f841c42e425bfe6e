// One pre-LayerNorm transformer block (GPT-2):
//   x = x + dropout(attn(ln_1(x)))
//   x = x + dropout(mlp(ln_2(x)))
// computed with each residual add fused with the LayerNorm after it (autograd::residual_layernorm):
// the block takes x together with z = ln_1(x), made by the caller (the first block's ln_1, or the
// previous block's fused add), and returns the new x with z' = next(x'), where `next` is the
// following block's ln_1 or the model's ln_f:
//   (a, z2) = residual_layernorm(x, dropout(attn(z)), ln_2)
//   (x', z') = residual_layernorm(a, dropout(mlp(z2)), next)
// The branches' output projections (attn.c_proj, mlp.c_proj) leave their biases to those ops,
// whose backward then sums their gradients on its way over dh: no pass of its own over the
// (B, T, C) gradient for either bias (ops/residual_layernorm.h).
#pragma once

#include "core/random.h"
#include "nn/causal_self_attention.h"
#include "nn/dropout.h"
#include "nn/gpt_config.h"
#include "nn/layer_norm.h"
#include "nn/mlp.h"

namespace ft::nn {

class Block : public Module {
 public:
  Block(const GPTConfig& cfg, Generator& gen);
  struct Output {
    Tensor x;  // (B, T, C): the residual stream after the block
    Tensor z;  // (B, T, C): next(x)
  };
  // x, z (B, T, C) with z = ln_1(x); doc_start (B, T) int32 or undefined (CausalSelfAttention).
  Output forward(const Tensor& x, const Tensor& z, const LayerNorm& next, const Tensor& doc_start = Tensor()) const;

  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;

 private:
  Dropout resid_dropout_;  // on each residual branch (HF's attn.resid_dropout and mlp.dropout)
};

}  // namespace ft::nn
