// Multi-head causal self-attention: c_attn (C -> 3C, the fused q|k|v projection), attention (flash
// or naive by config, with dropout on the probabilities in training mode), c_proj (C -> C).
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

  Linear c_attn;  // weight (3C, C): rows [q; k; v], head h owning rows h*D .. h*D+D-1 of each
  Linear c_proj;  // weight (C, C), a residual projection (init scaled by 1/sqrt(2L))

 private:
  int n_heads_;
  double dropout_;
  bool use_flash_;
  ops::AttentionOptions base_opts_;  // causal, determinism, the block-sparse pattern; dropout per call
  Generator& gen_;
};

}  // namespace ft::nn
