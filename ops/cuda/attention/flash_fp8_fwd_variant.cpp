// Names of the FP8 forward's schedules and the dev-only environment variable that picks one for
// benchmarks (flash_fp8.h).
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "ops/cuda/attention/flash_fp8.h"

namespace ft::cuda {

const char* fp8_fwd_variant_name(Fp8FwdVariant v) {
  switch (v) {
    case Fp8FwdVariant::kOcc2: return "occ2";
    case Fp8FwdVariant::kWg3: return "wg3";
    case Fp8FwdVariant::kWg4: return "wg4";
    case Fp8FwdVariant::kPipe: return "pipe";
    default: return "plain";
  }
}

Fp8FwdVariant fp8_fwd_variant_from_env() {
  static const Fp8FwdVariant variant = [] {
    const char* env = std::getenv("FLASHTRAIN_FP8_FWD_VARIANT");
    if (env == nullptr || *env == '\0') return Fp8FwdVariant::kPlain;
    for (auto v : {Fp8FwdVariant::kPlain, Fp8FwdVariant::kOcc2, Fp8FwdVariant::kWg3, Fp8FwdVariant::kWg4,
                   Fp8FwdVariant::kPipe})
      if (std::strcmp(env, fp8_fwd_variant_name(v)) == 0) return v;
    FT_CHECK_ARG(false, "[fp8_attention] FLASHTRAIN_FP8_FWD_VARIANT=", env,
                 " is not one of plain, occ2, wg3, wg4, pipe");
    return Fp8FwdVariant::kPlain;
  }();
  return variant;
}

}  // namespace ft::cuda
