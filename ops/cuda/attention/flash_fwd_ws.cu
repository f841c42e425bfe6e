// The warp-specialised Hopper forward (flash_fwd_ws_kernel.cuh): which calls it takes, and its
// launch. Its own translation unit, so the kernel does not lengthen the per-head-dim builds.
#include <optional>

#include "ops/cuda/attention/flash_fwd_ws_kernel.cuh"
#include "ops/cuda/attention/flash_launch.cuh"
#include "ops/cuda/attention/flash_run.h"
#include "ops/cuda/attention/flash_tma_map.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda::flash {

bool flash_fwd_ws_applies(const AttentionParams& p) {
  // From T = 1024 at D = 128, T = 2048 at D = 64 (flash_fwd_ws_min_t). Not built: dropout, the
  // document mask, D = 256.
  if (p.T < flash_fwd_ws_min_t(p.D) || p.doc_start != nullptr || p.dropout.threshold != 0) return false;
  if (p.D != 64 && p.D != 128) return false;
  // flash_wgmma_enabled, not only the device: set_flash_wgmma_allowed(false) keeps forcing the
  // mma.sync forwards (the tests that compare the two).
  return flash_wgmma_enabled() && flash_fwd_tma_supported(p);
}

// D = 128: the intra-warpgroup overlap and the ping-pong, 2 stages, the fastest form from T = 1024
// (H200, session 17, fwd ms at T = 2048 / 4096 / 16384, p = 0: plain 0.352 / 0.554 / 1.595, overlap
// 0.358 / 0.569 / 1.646, ping-pong 0.334 / 0.541 / 1.615, both 0.325 / 0.516 / 1.497; 3 stages
// 0.327 / 0.550 / 1.548 with both; session 27, after the branch-free masks, stream timing, ping-pong /
// both at T = 1024 0.156 / 0.151, 2048 0.256 / 0.247, 4096 0.455 / 0.425). D = 64: 3 consumer
// warpgroups (192 rows) with the overlap, the only form faster than the wgmma forward anywhere
// (T = 16384: 2.070 against 2.200; 2 consumers: plain 2.405, overlap 2.231; 3 consumers plain 2.109).
FlashFwdWsForm flash_fwd_ws_form(int head_dim, bool persistent) {
  if (head_dim == 128) return FlashFwdWsForm{true, true, 2, 2, persistent};
  return FlashFwdWsForm{true, false, 2, 3, persistent};
}

namespace {
constexpr int kPersistentGroupTokens = 32768;

template <class Kt, bool kBF16>
void launch_ws(const AttentionParams& p, cudaStream_t stream, bool rank_major) {
  constexpr int kHeadDim = Kt::kHeadDim;
  check_grid(p);
  const FlashFwdTmaMaps maps = make_flash_fwd_tma_maps(p, Kt::kBlockM, Kt::kBlockN);
  constexpr auto kernel = flash_fwd_ws_kernel<Kt, kBF16>;
  set_smem_limit(kernel, Kt::kSmemBytes);
  check_register_split<Kt, kernel>("forward");  // flash_launch_common.h
  const int64_t blocks = int64_t{(p.T + Kt::kBlockM - 1) / Kt::kBlockM} * p.B * p.H;
  FT_CHECK_ARG(blocks <= INT32_MAX, "[flash_attention] ", blocks, " query blocks exceed the grid");
  // Persistent: one CTA per SM (one fits: kSmemBytes), each taking blocks from a counter zeroed here;
  // the tests cap the grid lower (flash_fwd_ws_persistent_ctas_cap).
  int64_t grid = blocks;
  std::optional<Scratch> counter;
  if constexpr (Kt::kPersistent) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    grid = persistent_grid(device, blocks, flash_fwd_ws_persistent_ctas_cap());
    counter.emplace(device, sizeof(int));
    CUDA_CHECK(cudaMemsetAsync(counter->ptr, 0, sizeof(int), stream));
  }
  // Heads per group of the block order (grouped_block_order): 32768 / T (one head from T = 32768 on)
  // at D = 64, and for the persistent form at both head dims, so that its CTAs in flight read the K
  // and V of a few heads (8 MiB of them at D = 64, 16 at 128), which stay in L2; one head at D = 128
  // without it (FlashConfig's kGroupTokens). rank_major (variant 65): every head.
  const int group = rank_major             ? p.B * p.H
                    : Kt::kPersistent ? heads_per_group(p, kPersistentGroupTokens)
                                      : heads_per_group(p, FlashConfig<kHeadDim>::kGroupTokens);
  kernel<<<static_cast<unsigned>(grid), Kt::kNThreads, Kt::kSmemBytes, stream>>>(
      maps, p, group, counter ? static_cast<int*>(counter->ptr) : nullptr);
  CUDA_CHECK_LAUNCH();
}

template <int kHeadDim, bool kOverlap, bool kPingPong, int kStages, int kConsumers = 2, bool kPersistent = false>
void run_ws(const AttentionParams& p, cudaStream_t stream, bool rank_major = false) {
  using Kt = FlashFwdWsTraits<kHeadDim, kOverlap, kPingPong, kStages, kConsumers, kPersistent>;
  if (p.dtype == AttentionDType::kBF16) launch_ws<Kt, true>(p, stream, rank_major);
  else launch_ws<Kt, false>(p, stream, rank_major);
}
template <int kHeadDim, int kStages>
void run_ws(const AttentionParams& p, cudaStream_t stream, bool overlap, bool ping_pong, bool rank_major) {
  if (overlap)
    ping_pong ? run_ws<kHeadDim, true, true, kStages>(p, stream, rank_major)
              : run_ws<kHeadDim, true, false, kStages>(p, stream, rank_major);
  else ping_pong ? run_ws<kHeadDim, false, true, kStages>(p, stream, rank_major)
                 : run_ws<kHeadDim, false, false, kStages>(p, stream, rank_major);
}
template <int kHeadDim>
void run_ws(const AttentionParams& p, cudaStream_t stream, const FlashFwdWsForm& form) {
  if (form.persistent) {
    // Built for the dispatch's forms (flash_fwd_ws_form) and, at D = 128, the ping-pong without the
    // overlap, to keep the build short.
    const FlashFwdWsForm dispatch = flash_fwd_ws_form(kHeadDim, false);
    const bool ping_pong_only = kHeadDim == 128 && !form.overlap && form.ping_pong;
    if ((form.overlap != dispatch.overlap && !ping_pong_only) || form.ping_pong != dispatch.ping_pong ||
        form.stages != dispatch.stages || form.consumers != dispatch.consumers)
      throw Error(str("[run_flash_fwd_ws] this persistent form is not built at D = ", kHeadDim));
    if constexpr (kHeadDim == 128) {
      if (form.overlap) run_ws<128, true, true, 2, 2, true>(p, stream);
      else run_ws<128, false, true, 2, 2, true>(p, stream);
    } else {
      run_ws<64, true, false, 2, 3, true>(p, stream);
    }
    return;
  }
  if (form.consumers == 3) {
    if (kHeadDim != 64 || form.ping_pong || form.stages != 2)
      throw Error(str("[run_flash_fwd_ws] 3 consumers are built for D = 64 with 2 stages and no ping-pong, not D = ",
                      kHeadDim, form.ping_pong ? " with ping-pong" : "", " with ", form.stages, " stages"));
    if constexpr (kHeadDim == 64) {
      if (form.overlap) run_ws<64, true, false, 2, 3>(p, stream, form.rank_major);
      else run_ws<64, false, false, 2, 3>(p, stream, form.rank_major);
    }
    return;
  }
  if (form.stages == 3) run_ws<kHeadDim, 3>(p, stream, form.overlap, form.ping_pong, form.rank_major);
  else run_ws<kHeadDim, 2>(p, stream, form.overlap, form.ping_pong, form.rank_major);
}
}  // namespace

void run_flash_fwd_ws(const AttentionParams& p, cudaStream_t stream, const FlashFwdWsForm& form) {
  // flash_fwd_ws_applies: D = 64 or 128, bf16 or f16 (flash_fwd_tma_supported), no dropout.
  if (form.stages != 2 && form.stages != 3)
    throw Error(str("[run_flash_fwd_ws] a K / V ring of ", form.stages, " stages is not built (2 or 3)"));
  if (form.consumers != 2 && form.consumers != 3)
    throw Error(str("[run_flash_fwd_ws] ", form.consumers, " consumer warpgroups are not built (2 or 3)"));
  if (p.D == 128) run_ws<128>(p, stream, form);
  else run_ws<64>(p, stream, form);
}

}  // namespace ft::cuda::flash
