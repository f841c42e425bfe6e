#include "train/lr_schedule.h"

#include <cmath>

#include "core/error.h"

namespace ft {

namespace {
constexpr double kPi = 3.14159265358979323846;  // M_PI is POSIX, not C++17
}  // namespace

double LrSchedule::at(int64_t step) const {
  FT_CHECK_ARG(step >= 0, "[lr_schedule] step must be >= 0, got ", step);
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == LrDecay::Constant) return lr;
  if (step >= total_steps) return min_lr;
  const double p = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  const double k = decay == LrDecay::Cosine ? 0.5 * (1.0 + std::cos(kPi * p)) : 1.0 - p;
  return min_lr + (lr - min_lr) * k;
}

LrSchedule LrSchedule::from_config(const TrainConfig& cfg, int64_t total_steps) {
  FT_CHECK_ARG(total_steps > 0, "[lr_schedule] total_steps must be > 0, got ", total_steps);
  LrSchedule s;
  s.lr = cfg.lr;
  s.min_lr = cfg.min_lr_ratio * cfg.lr;
  s.warmup_steps = cfg.warmup_steps;
  s.total_steps = total_steps;
  s.decay = cfg.lr_decay;
  return s;
}

}  // namespace ft
