#include "train/precision.h"

#include <algorithm>

#include "core/error.h"

namespace ft {

DType compute_dtype(MixedPrecision p) {
  switch (p) {
    case MixedPrecision::BF16: return DType::BF16;
    case MixedPrecision::FP16: return DType::F16;
    case MixedPrecision::FP32: return DType::F32;
  }
  throw Error("[precision] unknown mixed_precision value");
}

LossScaler::LossScaler(bool enabled, double init_scale, int64_t growth_interval)
    : enabled_(enabled), scale_(enabled ? init_scale : 1.0), growth_interval_(growth_interval) {}

bool LossScaler::update(bool grads_finite) {
  if (!enabled_) return true;
  if (!grads_finite) {
    // Floor at 1: below it the scale would shrink gradients, which never cures an overflow.
    scale_ = std::max(1.0, scale_ / 2);
    good_steps_ = 0;
    return false;
  }
  if (++good_steps_ >= growth_interval_) {
    scale_ = std::min(scale_ * 2, 16777216.0);  // 2^24: far beyond what fp16 gradients need
    good_steps_ = 0;
  }
  return true;
}

Json LossScaler::to_json() const {
  if (!enabled_) return Json();
  return Json::object({{"scale", scale_}, {"good_steps", good_steps_}});
}

void LossScaler::load_json(const Json& j) {
  if (j.is_null() || !enabled_) return;
  scale_ = j.at("scale").as_double();
  good_steps_ = j.at("good_steps").as_int64();
}

}  // namespace ft
