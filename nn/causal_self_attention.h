// Multi-head causal self-attention: c_attn (C -> (H + 2 H_kv) D, the fused q|k|v projection; 3C
// for multi-head attention), attention (flash or naive by config, grouped-query when H_kv < H, with
// dropout on the probabilities in training mode; or, for inference only, the FP8 forward of
// multi-head attention without a document mask), c_proj (C -> C).
#pragma once

#include "core/random.h"
#include "nn/gpt_config.h"
#include "nn/linear.h"
#include "ops/attention.h"

namespace ft::nn {

class CausalSelfAttention : public Module {
 public:
  // `gen` (the model's) must outlive the module; it is drawn from only when dropout is active.
  CausalSelfAttention(const GPTConfig& cfg, Generator& gen);
  // (B, T, C) -> (B, T, C). doc_start (B, T) int32 or undefined: the document mask
  // (ops::AttentionOptions::doc_start), made once per batch by the model.
  Tensor forward(const Tensor& x, const Tensor& doc_start = Tensor()) const;
  // The same without c_proj's bias, which the caller adds (nn::Block: in the residual add's op).
  Tensor forward_without_proj_bias(const Tensor& x, const Tensor& doc_start = Tensor()) const;

  // weight ((H + 2 H_kv) D, C): rows [q (H D); k (H_kv D); v (H_kv D)], head h owning rows
  // h*D .. h*D+D-1 of each
  Linear c_attn;
  Linear c_proj;  // weight (C, C), a residual projection (init scaled by 1/sqrt(2L))

 private:
  Tensor attend(const Tensor& x, const Tensor& doc_start) const;  // (B, T, C): the heads before c_proj

  int n_heads_, n_kv_heads_;
  double dropout_;
  bool use_flash_;
  bool fp8_;  // GPTConfig::fp8_attention: refused in training mode
  ops::AttentionOptions base_opts_;  // causal, determinism, the block-sparse pattern; dropout per call
  Generator& gen_;
};

}  // namespace ft::nn
