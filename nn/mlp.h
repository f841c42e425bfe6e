// The transformer's feed-forward block: c_fc (C -> d_ff), activation, c_proj (d_ff -> C).
#pragma once

#include "nn/gpt_config.h"
#include "nn/linear.h"

namespace ft::nn {

class MLP : public Module {
 public:
  explicit MLP(const GPTConfig& cfg);
  Tensor forward(const Tensor& x) const;  // (B, T, C) -> (B, T, C)
  // The same without c_proj's bias, which the caller adds (nn::Block: in the residual add's op).
  Tensor forward_without_proj_bias(const Tensor& x) const;

  Linear c_fc;    // weight (d_ff, C)
  Linear c_proj;  // weight (C, d_ff), a residual projection (init scaled by 1/sqrt(2L))

 private:
  Tensor run(const Tensor& x, bool proj_bias) const;

  MlpActivation activation_;
};

}  // namespace ft::nn
