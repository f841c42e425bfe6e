// Names of the FP8 forward's schedules and the dev-only environment variable that picks one for
// benchmarks (flash_fp8.h).
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "ops/cuda/attention/flash_fp8.h"

namespace ft::cuda {

const char* fp8_fwd_variant_name(Fp8FwdVariant v) {
  switch (v) {
    case Fp8FwdVariant::kPlain: return "plain";
    case Fp8FwdVariant::kPipe: return "pipe";
    case Fp8FwdVariant::kWg1Occ4: return "wg1occ4";
    case Fp8FwdVariant::kWg1Occ3: return "wg1occ3";
    default: return "default";
  }
}

Fp8FwdVariant fp8_fwd_variant_from_env() {
  static const Fp8FwdVariant variant = [] {
    const char* env = std::getenv("FLASHTRAIN_FP8_FWD_VARIANT");
    if (env == nullptr || *env == '\0') return Fp8FwdVariant::kDefault;
    for (auto v : {Fp8FwdVariant::kDefault, Fp8FwdVariant::kPlain, Fp8FwdVariant::kPipe, Fp8FwdVariant::kWg1Occ4,
                   Fp8FwdVariant::kWg1Occ3})
      if (std::strcmp(env, fp8_fwd_variant_name(v)) == 0) return v;
    FT_CHECK_ARG(false, "[fp8_attention] FLASHTRAIN_FP8_FWD_VARIANT=", env, " is not one of default, plain, pipe, wg1occ4, wg1occ3");
    return Fp8FwdVariant::kDefault;
  }();
  return variant;
}

}  // namespace ft::cuda
