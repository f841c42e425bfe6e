// The learning-rate schedule: a pure function of the optimizer step.
//
//   step < warmup:        lr * (step + 1) / warmup          (linear; step 0 already moves)
//   warmup <= step < N:   decay from lr to min_lr over the steps [warmup, N)
//       cosine:   min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * p))
//       linear:   min_lr + (lr - min_lr) * (1 - p)
//       constant: lr
//     with p = (step - warmup) / (N - warmup), so p runs from 0 at the first decay step to 1 at N
//   step >= N:            min_lr (constant: lr)
//
// min_lr = min_lr_ratio * lr (config key min_lr_ratio, default 0.1, the floor nanoGPT and the
// Chinchilla recipe use). A ratio rather than an absolute value keeps `--set lr=...` meaningful.
// Warmup counts from (step + 1) so the first update is not wasted on lr = 0. When N <= warmup
// the run ends inside the warmup and never decays.
#pragma once

#include <cstdint>

#include "train/config/config.h"

namespace ft {

struct LrSchedule {
  double lr = 0;            // peak
  double min_lr = 0;        // floor of the decay
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // N: optimizer steps in the run
  LrDecay decay = LrDecay::Cosine;

  // The learning rate for optimizer step `step` (0-based).
  double at(int64_t step) const;

  // From a config and the run's total step count (max_steps, or epochs x steps per epoch).
  static LrSchedule from_config(const TrainConfig& cfg, int64_t total_steps);
};

}  // namespace ft
