// AdamW over the parameter arena: two fused ops::adamw_step calls, one per region (weight decay
// on the matrices and embeddings, none on biases and LayerNorm gains), each also rewriting the
// bf16/f16 working copy of its region. Global-norm clipping and the skip of a non-finite step
// happen on the device from the norm tensor, so a step never waits for the host.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/adamw.h"
#include "train/checkpoint/safetensors.h"
#include "train/param_arena.h"

namespace ft {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 0.0;  // 0: no clipping
};

// The kernel options of one update from the config and the step's values (shared with ZeRO-1).
ops::AdamWOptions adamw_options(const AdamWConfig& cfg, double lr, int64_t step, double grad_scale,
                                const Tensor& grad_norm);

class AdamW {
 public:
  AdamW(ParamArena& arena, const AdamWConfig& cfg);

  // One update. step counts from 1 (bias correction). grad_scale multiplies the stored gradients
  // (1 / (accumulation steps x loss scale)); grad_norm is ops::grad_norm(arena.grads()).norm.
  void step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm);

  // The moments as checkpoint tensors ("adamw.m", "adamw.v": flat (N) f32 in the arena's layout),
  // and back (numel checked against the arena).
  std::vector<NamedTensor> state_tensors() const;
  void load_state(const std::vector<NamedTensor>& tensors);

 private:
  ParamArena& arena_;
  AdamWConfig cfg_;
  Tensor m_, v_;  // (N) f32, same layout as the arena
};

}  // namespace ft
