// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh): which calls it takes, and its
// launch (the same preprocess and dQ conversion as the other backwards around it, or, in the
// deterministic kStoredDs form, the dQ product from the stored dS after it: flash_ds_store.cuh). Its
// own translation unit, so the kernel does not lengthen the per-head-dim builds.
#include "ops/cuda/attention/flash_bwd_ds_dq_kernel.cuh"
#include "ops/cuda/attention/flash_bwd_ws_kernel.cuh"
#include "ops/cuda/attention/flash_launch.cuh"
#include "ops/cuda/attention/flash_run.h"
#include "ops/cuda/attention/flash_tma_map.h"

namespace ft::cuda::flash {

bool flash_bwd_ws_enabled_for(const AttentionParams& p) {
  return p.T >= flash_bwd_ws_min_t() && p.doc_start == nullptr && (p.D == 64 || p.D == 128);
}
bool flash_bwd_ws_has_fixed_point_dq(int head_dim) {
  auto fits = [](auto traits) {
    using Kt = decltype(traits);
    return Kt::fits(Kt::template dq_form<true, false>()) && Kt::fits(Kt::template dq_form<true, true>());
  };
  if (head_dim == 64) return fits(FlashBwdWsTraits<64>{});
  return head_dim == 128 && fits(FlashBwdWsTraits<128>{});
}

bool flash_bwd_ws_runs_here(const AttentionParams& p) {
  return flash_bwd_ws_enabled_for(p) && flash_sm90a_device() && flash_bwd_tma_supported(p);
}

bool flash_bwd_ws_applies(const AttentionParams& p, const FlashBackwardMode& mode) {
  if (!flash_bwd_ws_runs_here(p)) return false;
  // Of the deterministic forms the stored dS and the fixed point are built, the latter not at every
  // head dim.
  return !mode.deterministic || flash_stored_ds_dq(p) ||
         (flash_fixed_point_dq(p) && flash_bwd_ws_has_fixed_point_dq(p.D));
}

namespace {
// The preprocess (D, and the dq_accum zeroing the dQ form needs), the backward, then dQ in the input
// dtype: the conversion of dq_accum, or (kStoreDs, the kStoredDs form) dQ = dS K from the dS^T the
// backward left in p.dq_accum (flash_ds_store.cuh, flash_bwd_ds_dq_kernel.cuh; nothing to zero).
template <int kHeadDim, bool kBF16, bool kDropout, bool kFixedDq, bool kStoreDs = false>
void launch_ws(const AttentionParams& p, cudaStream_t stream) {
  using Kt = FlashBwdWsTraits<kHeadDim>;
  constexpr auto kForm = Kt::template dq_form<kFixedDq, kDropout, kStoreDs>();
  if constexpr (!Kt::fits(kForm)) {
    throw Error("[flash_attention] the warp-specialised backward has no fixed-point dQ at this head dim");
  } else {
    check_grid(p);
    const BwdRowKernels<kHeadDim> rows(p);
    rows.template preprocess<kBF16>(p, stream, nullptr, 0, kStoreDs ? 0 : rows.accum_to_zero(kFixedDq));
    const FlashBwdTmaMaps maps = make_flash_bwd_tma_maps(p, Kt::kBlockM, Kt::kBlockN);
    constexpr auto kernel = flash_bwd_ws_kernel<kHeadDim, kBF16, kDropout, kFixedDq, kStoreDs>;
    constexpr int smem = Kt::smem_bytes(kForm);
    set_smem_limit(kernel, smem);
    check_register_split<Kt, kernel>("backward");  // flash_launch_common.h
    const unsigned grid = static_cast<unsigned>((p.T + Kt::kBlockN - 1) / Kt::kBlockN) * p.B * p.H;
    kernel<<<grid, Kt::kNThreads, smem, stream>>>(maps, p, heads_per_group(p, FlashConfig<kHeadDim>::kGroupTokens));
    CUDA_CHECK_LAUNCH();
    if constexpr (kStoreDs) {
      using Dt = FlashDsDqTraits<kHeadDim>;
      constexpr auto dq_kernel = flash_bwd_ds_dq_kernel<kHeadDim, kBF16>;
      set_smem_limit(dq_kernel, Dt::kSmemBytes);
      const unsigned dq_grid = static_cast<unsigned>(ds_query_tiles(p.T)) * p.B * p.H;
      dq_kernel<<<dq_grid, Dt::kNThreads, Dt::kSmemBytes, stream>>>(maps, p);
      CUDA_CHECK_LAUNCH();
    } else {
      rows.template convert_dq<kBF16, kFixedDq>(p, stream);
    }
  }
}

template <int kHeadDim>
void run_ws(const AttentionParams& p, cudaStream_t stream, bool fixed_dq, bool stored_ds) {
  dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto /*doc_mask: never, flash_bwd_ws_applies*/) {
    constexpr bool kB = decltype(bf16)::value, kP = decltype(dropout)::value;
    if (stored_ds) return launch_ws<kHeadDim, kB, kP, false, true>(p, stream);
    fixed_dq ? launch_ws<kHeadDim, kB, kP, true>(p, stream) : launch_ws<kHeadDim, kB, kP, false>(p, stream);
  });
}
}  // namespace

void run_flash_bwd_ws(const AttentionParams& p, cudaStream_t stream, const FlashBackwardMode& mode) {
  // flash_bwd_ws_applies: deterministic means the stored dS or the fixed-point dQ here.
  const bool stored_ds = mode.deterministic && flash_stored_ds_dq(p);
  const bool fixed_dq = mode.deterministic && !stored_ds;
  if (p.D == 128) run_ws<128>(p, stream, fixed_dq, stored_ds);
  else run_ws<64>(p, stream, fixed_dq, stored_ds);
}

}  // namespace ft::cuda::flash
