// The precision policy: which dtype the model computes in, and fp16's dynamic loss scaling.
//
// bf16 and fp16 keep fp32 master weights and fp32 gradients (train/param_arena.h); only the
// working copies the matrix products and attention read are 16-bit. fp16's 5-bit exponent
// underflows small gradients, so the loss is multiplied by `scale` before backward and the
// optimizer divides it back out (AdamWOptions::grad_scale). A non-finite gradient norm means the
// scale overflowed: ops::adamw_step skips that step on the device, and update() halves the scale;
// after growth_interval clean steps in a row the scale doubles.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "train/config/config.h"
#include "train/config/json.h"

namespace ft {

// F32, BF16 or F16.
DType compute_dtype(MixedPrecision p);

class LossScaler {
 public:
  // enabled = false (bf16, fp32): scale stays 1 and update() does nothing.
  LossScaler(bool enabled, double init_scale, int64_t growth_interval);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }
  // After a step: grads_finite is whether the gradient norm was finite. Returns whether the step
  // was taken (always true when disabled).
  bool update(bool grads_finite);

  // {"scale", "good_steps"} when enabled, else null (state.json's loss_scaler).
  Json to_json() const;
  void load_json(const Json& j);  // accepts what to_json wrote; null leaves the state as it is

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t good_steps_ = 0;
};

}  // namespace ft
