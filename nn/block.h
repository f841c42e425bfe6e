// One pre-LayerNorm transformer block (GPT-2):
//   x = x + dropout(attn(ln_1(x)))
//   x = x + dropout(mlp(ln_2(x)))
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
  Tensor forward(const Tensor& x) const;  // (B, T, C) -> (B, T, C)

  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;

 private:
  Dropout resid_dropout_;  // on each residual branch (HF's attn.resid_dropout and mlp.dropout)
};

}  // namespace ft::nn
