// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh): which calls it takes, and its
// launch (the same preprocess and dQ conversion as the other backwards around it). Its own
// translation unit, so the kernel does not lengthen the per-head-dim builds.
#include <climits>

#include "ops/cuda/attention/flash_bwd_ws_kernel.cuh"
#include "ops/cuda/attention/flash_launch.cuh"
#include "ops/cuda/attention/flash_run.h"
#include "ops/cuda/attention/flash_tma_map.h"

namespace ft::cuda::flash {

bool flash_bwd_ws_applies(const AttentionParams& p, const FlashBackwardMode& mode) {
  if (p.T < flash_bwd_ws_min_t() || p.D != 64 || p.doc_start != nullptr) return false;
  if (mode.deterministic && !flash_fixed_point_dq(p)) return false;  // only the fixed-point form is built
  return flash_sm90a_device() && flash_bwd_tma_supported(p);
}

namespace {
template <bool kBF16, bool kDropout, bool kFixedDq>
void launch_ws(const AttentionParams& p, cudaStream_t stream) {
  using Kt = FlashBwdWsTraits;
  check_grid(p);
  const BwdRowKernels<Kt::kHeadDim> rows(p);
  rows.template preprocess<kBF16>(p, stream, nullptr, 0, rows.accum_to_zero(kFixedDq));
  const FlashBwdTmaMaps maps = make_flash_bwd_tma_maps(p, Kt::kBlockM, Kt::kBlockN);
  auto kernel = flash_bwd_ws_kernel<kBF16, kDropout, kFixedDq>;
  constexpr int smem = Kt::smem_bytes<kFixedDq>();
  set_smem_limit(kernel, smem);
  const unsigned grid = static_cast<unsigned>((p.T + Kt::kBlockN - 1) / Kt::kBlockN) * p.B * p.H;
  kernel<<<grid, Kt::kNThreads, smem, stream>>>(maps, p, heads_per_group(p, FlashConfig<64>::kGroupTokens));
  CUDA_CHECK_LAUNCH();
  rows.template convert_dq<kBF16, kFixedDq>(p, stream);
}
}  // namespace

void run_flash_bwd_ws(const AttentionParams& p, cudaStream_t stream, const FlashBackwardMode& mode) {
  const bool fixed = mode.deterministic;  // flash_bwd_ws_applies: deterministic means fixed-point here
  dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto /*doc_mask: never, flash_bwd_ws_applies*/) {
    constexpr bool kB = decltype(bf16)::value, kP = decltype(dropout)::value;
    fixed ? launch_ws<kB, kP, true>(p, stream) : launch_ws<kB, kP, false>(p, stream);
  });
}

}  // namespace ft::cuda::flash
