// The per-head-dim entry of the FP8 forward, one instantiation per translation unit
// (flash_fp8_fwd_hdim*.cu), switched on in flash_fp8.cu.
#pragma once

#include "core/stream.h"
#include "ops/attention_fp8_params.h"
#include "ops/cuda/attention/flash_fp8.h"

namespace ft::cuda::flash {

template <int D>
void run_flash_fp8_fwd(const Fp8AttentionParams& p, Stream stream, Fp8FwdVariant variant);

}  // namespace ft::cuda::flash
