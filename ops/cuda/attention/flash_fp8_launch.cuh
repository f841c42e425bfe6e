// Launch of the FP8 forward for one head dim (included by the flash_fp8_fwd_hdim*.cu files): the
// variant switch (flash_fp8.h), each variant's traits, and the grid.
#pragma once

#include "core/cuda/check.h"
#include "ops/cuda/attention/flash_fp8_fwd_kernel.cuh"
#include "ops/cuda/attention/flash_fp8_fwd_pipe_kernel.cuh"
#include "ops/cuda/attention/flash_fp8_run.h"
#include "ops/cuda/attention/flash_launch_common.h"

namespace ft::cuda::flash {

// The default: two warpgroups share each key tile (128 query rows per CTA), as the bf16 wgmma
// forward's wide tile.
template <int D>
using FlashFp8Fwd = FlashFp8FwdTraits<D, 2>;

// kBlockM rows per CTA (kBlockM divides T_pad: the traits' static_assert).
template <class Kt, class Kernel>
void launch_flash_fp8_fwd(Kernel kernel, const Fp8AttentionParams& p, Stream stream) {
  set_smem_limit(kernel, Kt::kSmemBytes);
  const int blocks = fp8_padded_rows(p.T) / Kt::kBlockM;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.B * p.H));
  kernel<<<grid, Kt::kNThreads, Kt::kSmemBytes, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

template <class Kt>
void launch_flash_fp8_fwd(const Fp8AttentionParams& p, Stream stream) {
  if constexpr (Kt::kPipelined)
    launch_flash_fp8_fwd<Kt>(flash_fp8_fwd_pipe_kernel<Kt>, p, stream);
  else
    launch_flash_fp8_fwd<Kt>(flash_fp8_fwd_kernel<Kt>, p, stream);
}

template <int D>
void run_flash_fp8_fwd(const Fp8AttentionParams& p, Stream stream, Fp8FwdVariant variant) {
  FT_CHECK_ARG(static_cast<int64_t>(p.B) * p.H <= 65535, "[fp8_attention] B * H = ",
               static_cast<int64_t>(p.B) * p.H, " exceeds 65535");
  using V = Fp8FwdVariant;
  if (variant == V::kDefault) variant = fp8_fwd_default_variant(D);
  if (!fp8_fwd_variant_fits(variant, D)) variant = V::kPlain;
  // `if constexpr`: a variant that does not fit D is never instantiated (no spilling kernel built).
  if constexpr (fp8_fwd_variant_fits(V::kWg1Occ4, D))
    if (variant == V::kWg1Occ4) return launch_flash_fp8_fwd<FlashFp8FwdTraits<D, 1, 4, false, true, true>>(p, stream);
  if constexpr (fp8_fwd_variant_fits(V::kWg1Occ3, D))
    if (variant == V::kWg1Occ3) return launch_flash_fp8_fwd<FlashFp8FwdTraits<D, 1, 3, false, true, true>>(p, stream);
  if constexpr (fp8_fwd_variant_fits(V::kPipe, D))
    if (variant == V::kPipe) return launch_flash_fp8_fwd<FlashFp8FwdTraits<D, 2, 1, true>>(p, stream);
  launch_flash_fp8_fwd<FlashFp8Fwd<D>>(p, stream);
}

}  // namespace ft::cuda::flash
