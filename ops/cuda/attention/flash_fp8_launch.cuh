// Launch of the FP8 forward for one head dim (included by the flash_fp8_fwd_hdim*.cu files).
#pragma once

#include "core/cuda/check.h"
#include "ops/cuda/attention/flash_fp8_fwd_kernel.cuh"
#include "ops/cuda/attention/flash_fp8_run.h"
#include "ops/cuda/attention/flash_launch_common.h"

namespace ft::cuda::flash {

// Two warpgroups share each key tile (128 query rows per CTA), as the bf16 wgmma forward's wide tile.
template <int D>
using FlashFp8Fwd = FlashFp8FwdTraits<D, 2>;

template <int D>
void run_flash_fp8_fwd(const Fp8AttentionParams& p, Stream stream) {
  using Kt = FlashFp8Fwd<D>;
  FT_CHECK_ARG(static_cast<int64_t>(p.B) * p.H <= 65535, "[fp8_attention] B * H = ",
               static_cast<int64_t>(p.B) * p.H, " exceeds 65535");
  auto kernel = flash_fp8_fwd_kernel<Kt>;
  set_smem_limit(kernel, Kt::kSmemBytes);
  const dim3 grid(static_cast<unsigned>(fp8_padded_rows(p.T) / Kt::kBlockM), static_cast<unsigned>(p.B * p.H));
  kernel<<<grid, Kt::kNThreads, Kt::kSmemBytes, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda::flash
