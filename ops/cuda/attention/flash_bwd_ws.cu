// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh): which calls it takes, and its
// launch (the same preprocess and dQ conversion as the other backwards around it, or, in the
// deterministic kStoredDs form, the dQ product from the stored dS after it: flash_ds_store.cuh). Its
// own translation unit, so the kernel does not lengthen the per-head-dim builds.
#include "ops/cuda/attention/flash_bwd_ds_dq_kernel.cuh"
#include "ops/cuda/attention/flash_bwd_ws_kernel.cuh"
#include "ops/cuda/attention/flash_launch.cuh"
#include "ops/cuda/attention/flash_run.h"
#include "ops/cuda/attention/flash_tma_map.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda::flash {

bool flash_bwd_ws_enabled_for(const AttentionParams& p) {
  return p.T >= flash_bwd_ws_min_t() && p.doc_start == nullptr && (p.D == 64 || p.D == 128);
}
namespace {
// Whether the kernel's dQ form kDq fits its shared memory at this head dim, with and without dropout.
template <WsDq kDq>
bool ws_has(int head_dim) {
  auto fits = [](auto traits) {
    using Kt = decltype(traits);
    return Kt::fits(Kt::template dq_form<kDq, false>()) && Kt::fits(Kt::template dq_form<kDq, true>());
  };
  if (head_dim == 64) return fits(FlashBwdWsTraits<64>{});
  return head_dim == 128 && fits(FlashBwdWsTraits<128>{});
}
}  // namespace

bool flash_bwd_ws_has_fixed_point_dq(int head_dim) { return ws_has<WsDq::kFixedPoint>(head_dim); }
bool flash_bwd_ws_has_ordered_dq(int head_dim) { return ws_has<WsDq::kOrdered>(head_dim); }

bool flash_bwd_ws_runs_here(const AttentionParams& p) {
  return flash_bwd_ws_enabled_for(p) && flash_sm90a_device() && flash_bwd_tma_supported(p);
}

bool flash_bwd_ws_applies(const AttentionParams& p, const FlashBackwardMode& mode) {
  if (!flash_bwd_ws_runs_here(p)) return false;
  // Of the deterministic forms the stored dS, the fixed point and the ordered dQ are built, the last
  // two not at every head dim.
  return !mode.deterministic || flash_stored_ds_dq(p) ||
         (flash_fixed_point_dq(p) ? flash_bwd_ws_has_fixed_point_dq(p.D) : flash_bwd_ws_has_ordered_dq(p.D));
}

namespace {
// The preprocess (D, and the dq_accum zeroing the dQ form needs; kOrdered: its counters too), the
// backward, then dQ in the input dtype: the conversion of dq_accum, or (kStoredDs) dQ = dS K from the
// dS^T the backward left in p.dq_accum (flash_ds_store.cuh, flash_bwd_ds_dq_kernel.cuh; nothing to
// zero).
template <int kHeadDim, bool kBF16, bool kDropout, WsDq kDq, bool kPersistent>
void launch_ws_as(const AttentionParams& p, cudaStream_t stream, int* dq_semaphore) {
  using Kt = FlashBwdWsTraits<kHeadDim, ws_kv_buffers(kHeadDim, kPersistent)>;
  constexpr auto kForm = Kt::template dq_form<kDq, kDropout>();
  constexpr bool kFixedDq = kDq == WsDq::kFixedPoint, kStoreDs = kDq == WsDq::kStoredDs;
  if constexpr (!Kt::fits(kForm)) {
    throw Error("[flash_attention] the warp-specialised backward has no such deterministic dQ at this head dim");
  } else {
    check_grid(p);
    const BwdRowKernels<kHeadDim> rows(p);
    // kOrdered: a counter per (batch * head, 64-query tile), within the workspace sized for the
    // older kernels' 32-query tiles of 4 counters (flash_attention.h).
    static_assert(Kt::kBlockM >= kFlashDqTileRows, "the ordered dQ's counters fit dq_semaphore");
    const int64_t n_semaphores =
        kDq == WsDq::kOrdered ? static_cast<int64_t>(p.B) * p.H * ((p.T + Kt::kBlockM - 1) / Kt::kBlockM) : 0;
    if (n_semaphores > 0 && dq_semaphore == nullptr)
      throw Error("[flash_attention] the ordered dQ needs the dq_semaphore workspace");
    // kOrdered, dense or causal: key block 0 stores into dq_accum, so there is nothing to zero
    // (ws_first_block_stores_dq; the conversion reads no 16-row slab past T, which no block writes).
    const bool zero_accum = !kStoreDs && !(kDq == WsDq::kOrdered && ws_first_block_stores_dq(p));
    const int64_t items = static_cast<int64_t>((p.T + Kt::kBlockN - 1) / Kt::kBlockN) * p.B * p.H;
    int* work_counter = nullptr;  // kPersistent: zeroed by the preprocess with the ordered dQ's counters
    int64_t n_zeroed = n_semaphores;
    if constexpr (kPersistent) {
      work_counter = kDq == WsDq::kOrdered ? dq_semaphore + n_semaphores
                                           : reinterpret_cast<int*>(p.dq_accum + rows.accum_floats);
      n_zeroed = n_semaphores + 1;
    }
    rows.template preprocess<kBF16>(p, stream, kDq == WsDq::kOrdered ? dq_semaphore : work_counter, n_zeroed,
                                    zero_accum ? rows.accum_to_zero(kFixedDq) : 0);
    const FlashBwdTmaMaps maps = make_flash_bwd_tma_maps(p, Kt::kBlockM, Kt::kBlockN);
    constexpr auto kernel = flash_bwd_ws_kernel<kHeadDim, kBF16, kDropout, kDq, kPersistent>;
    constexpr int smem = Kt::smem_bytes(kForm);
    set_smem_limit(kernel, smem);
    check_register_split<Kt, kernel>("backward");  // flash_launch_common.h
    int64_t grid = items;
    if constexpr (kPersistent) {
      int device = 0;
      CUDA_CHECK(cudaGetDevice(&device));
      grid = persistent_grid(device, items);
    }
    kernel<<<static_cast<unsigned>(grid), Kt::kNThreads, smem, stream>>>(
        maps, p, heads_per_group(p, FlashConfig<kHeadDim>::kGroupTokens), dq_semaphore, work_counter);
    CUDA_CHECK_LAUNCH();
    if constexpr (kStoreDs) {
      using Dt = FlashDsDqTraits<kHeadDim>;
      constexpr auto dq_kernel = flash_bwd_ds_dq_kernel<kHeadDim, kBF16>;
      set_smem_limit(dq_kernel, Dt::kSmemBytes);
      const unsigned dq_grid = static_cast<unsigned>(Dt::grid(p.T, static_cast<int64_t>(p.B) * p.H));
      dq_kernel<<<dq_grid, Dt::kNThreads, Dt::kSmemBytes, stream>>>(
          maps, p, heads_per_group(p, Dt::kGroupTokens));
      CUDA_CHECK_LAUNCH();
    } else {
      rows.template convert_dq<kBF16, kFixedDq>(p, stream);
    }
  }
}

// The persistent form (a CTA per SM taking work items from a counter; flash_bwd_ws_kernel.cuh) where
// the counter has a place: the atomic dQ (in the fixed-point half of dq_accum, which the fp32 forms
// leave unused) and the ordered dQ (after its counters). It hides
// what each non-persistent CTA paid alone: the last tile's dQ adds and the launch gap, and at D = 64,
// where a second K / V buffer fits, the K / V load before the first product: about 4 of a CTA's 18 us
// at T = 1024 (H200, session 30, bench/attention/NOTES.md).
// - D = 64: without dropout at every T; with it up to T = 2048 (at T = 4096 and 16384 the ordered dQ
//   was 4-9% slower persistent, the atomic one level; session 30).
// - D = 128 (one K / V buffer): with dropout at every T, without it up to T = 4096 (the ordered dQ
//   as the atomic one, not measured apart: session 33 measured it in this dispatch). H200, session 31,
//   ncu, ws kernel us, persistent / not: p = 0.1 T = 2048 1007 / 1056, T = 4096 1845 / 1948,
//   T = 16384 6415 / 6735; p = 0 T = 1024 462 / 474, T = 2048 788 / 804, T = 4096 1429 / 1448,
//   T = 16384 4966 / 4948, and in stream timing (both library orders) 2-4% slower at T = 8192 and
//   up to 4% at 16384 without dropout.
template <int kHeadDim, WsDq kDq>
constexpr bool kWsPersistent = kDq == WsDq::kAtomic || kDq == WsDq::kOrdered;
constexpr int kWsPersistentMaxTWithDropout64 = 2048, kWsPersistentMaxTWithoutDropout128 = 4096;

template <int kHeadDim, bool kBF16, bool kDropout, WsDq kDq>
void launch_ws(const AttentionParams& p, cudaStream_t stream, int* dq_semaphore) {
  if constexpr (kWsPersistent<kHeadDim, kDq>) {
    const bool persistent = kHeadDim == 64 ? !kDropout || p.T <= kWsPersistentMaxTWithDropout64
                                           : kDropout || p.T <= kWsPersistentMaxTWithoutDropout128;
    if (persistent) return launch_ws_as<kHeadDim, kBF16, kDropout, kDq, true>(p, stream, dq_semaphore);
  }
  launch_ws_as<kHeadDim, kBF16, kDropout, kDq, false>(p, stream, dq_semaphore);
}

template <int kHeadDim>
void run_ws(const AttentionParams& p, cudaStream_t stream, WsDq dq, int* dq_semaphore) {
  dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto /*doc_mask: never, flash_bwd_ws_applies*/) {
    constexpr bool kB = decltype(bf16)::value, kP = decltype(dropout)::value;
    switch (dq) {
      case WsDq::kAtomic: return launch_ws<kHeadDim, kB, kP, WsDq::kAtomic>(p, stream, nullptr);
      case WsDq::kFixedPoint: return launch_ws<kHeadDim, kB, kP, WsDq::kFixedPoint>(p, stream, nullptr);
      case WsDq::kStoredDs: return launch_ws<kHeadDim, kB, kP, WsDq::kStoredDs>(p, stream, nullptr);
      case WsDq::kOrdered: return launch_ws<kHeadDim, kB, kP, WsDq::kOrdered>(p, stream, dq_semaphore);
    }
  });
}
}  // namespace

bool set_flash_bwd_ws_trace(unsigned long long* records) {
#if defined(FT_FLASH_BWD_TRACE)
  CUDA_CHECK(cudaMemcpyToSymbol(g_ws_trace, &records, sizeof(records)));
  return true;
#else
  (void)records;
  return false;
#endif
}

void run_flash_bwd_ws(const AttentionParams& p, cudaStream_t stream, const FlashBackwardMode& mode) {
  // flash_bwd_ws_applies: deterministic means the stored dS, the fixed point or the ordered dQ here.
  const WsDq dq = !mode.deterministic        ? WsDq::kAtomic
                  : flash_stored_ds_dq(p)    ? WsDq::kStoredDs
                  : flash_fixed_point_dq(p) ? WsDq::kFixedPoint
                                             : WsDq::kOrdered;
  if (p.D == 128) run_ws<128>(p, stream, dq, mode.dq_semaphore);
  else run_ws<64>(p, stream, dq, mode.dq_semaphore);
}

}  // namespace ft::cuda::flash
