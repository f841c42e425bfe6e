// Multi-head causal self-attention: c_attn (C -> 3C, the fused q|k|v projection), attention (flash
// or naive by config, with dropout on the probabilities in training mode; or, for inference only,
// the FP8 forward), c_proj (C -> C).
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
  Tensor forward(const Tensor& x) const;  // (B, T, C) -> (B, T, C)

  Linear c_attn;  // weight (3C, C): rows [q; k; v], head h owning rows h*D .. h*D+D-1 of each
  Linear c_proj;  // weight (C, C), a residual projection (init scaled by 1/sqrt(2L))

 private:
  int n_heads_;
  double dropout_;
  bool use_flash_;
  bool fp8_;  // GPTConfig::fp8_attention: refused in training mode
  ops::AttentionOptions base_opts_;  // causal, determinism, the block-sparse pattern; dropout per call
  Generator& gen_;
};

}  // namespace ft::nn
