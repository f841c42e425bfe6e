// Launch templates: the one switch that turns runtime choices (dtype, dropout on/off, document
// mask on/off) into template parameters, and the tile shapes per head dim. Included only by the
// per-head-dim translation units (flash_fwd_hdim64.cu, ...), so each TU instantiates one head dim.
//
// Tile shapes (see flash_traits.h), chosen from timings on an H200 (bench/attention, causal bf16,
// H=12, B*T=32768; numbers in bench/attention/NOTES.md):
//   forward  D=64 on sm_90a (flash_wgmma_enabled): flash_fwd_wgmma_kernel.cuh, 64-key tiles, every
//            dropout; one warpgroup x 64 rows, 3 CTAs/SM up to T=2048 (4096 with dropout;
//            flash_fwd_small_tile_max_t), two warpgroups x 64 rows sharing each K/V tile, 2 CTAs/SM
//            above: at T=4096 0.71 ms against 0.85 ms for the mma.sync kernels below (p=0.1: 1.26
//            against 1.44; session 4); these remain the path for other GPUs and builds without 90a
//   forward  D=64, T > 2048, no dropout: kBlockM=128, kBlockN=64, 4 warps x 32 rows (each K/V
//            fragment read from shared memory feeds two mma tiles), 2 CTAs/SM (252 registers)
//   forward  D=64, T <= 2048, no dropout: kBlockM=64, 4 warps x 16 rows, 3 CTAs/SM (163 regs):
//            at T=1024 0.31 ms against 0.51 ms for the 128-row tile (more CTAs, better balance)
//   forward  D=64, dropout, any T: the same 64-row tile: more warps per SM hide the Philox
//            arithmetic (T=4096, p=0.1: 1.42 ms; 128-row tile 1.68 ms; 8 warps x 16 rows 1.45 ms)
//   forward  D=128 on sm_90a: the same wgmma kernel with two 64-column panels a row: 64-key tiles,
//            one warpgroup x 64 rows, 2 CTAs/SM up to flash_fwd_small_tile_max_t (the D = 64
//            thresholds, not tuned), two warpgroups x 64 rows, 1 CTA/SM above. H100 fwd ms against
//            the mma.sync tile below: T = 1024 0.248 / 0.371, T = 4096 0.718 / 0.976 (p = 0; session 13)
//   forward  D=64 and 128 on sm_90a, no dropout / document mask, T >= flash_fwd_ws_min_t (D = 128:
//            1024; D = 64: 16384, the wgmma forward is faster below): flash_fwd_ws_kernel.cuh
//            (FlashAttention-3's structure: TMA producer, wgmma consumers, intra-warpgroup overlap;
//            D = 128 two consumers and ping-pong; D = 64 three). H200 fwd ms against the wgmma
//            forward: D = 128 T = 1024 0.151 / 0.185 (session 27), T = 2048 0.325 / 0.370,
//            T = 4096 0.516 / 0.788, T = 16384 1.497 / 2.390; D = 64 T = 16384 2.070 / 2.200
//            (p = 0; session 17)
//   forward  D=128 elsewhere: kBlockM=128, kBlockN=64, 8 warps (16 rows per warp; registers hold
//            O 16x128)
//   backward D=64 and 128 on sm_90a, T >= 1024 (flash_bwd_ws_min_t), atomic or fixed-point dQ, no
//            document mask: flash_bwd_ws_kernel.cuh (FlashAttention-3's structure: a TMA producer
//            warp, two wgmma consumer warpgroups, dQ by bulk reduce-adds). H100 bwd ms against the
//            kernels below: D = 64 T = 4096 1.669 / 2.259 (p = 0), 2.102 / 2.560 (p = 0.1); D = 128
//            1.374 / 2.343 (session 16). The kernels below take every other call.
//   backward D=64, atomic dQ, T >= 2048 (4096 with dropout; flash_bwd_wide_min_t(64, .)):
//            flash_bwd_wide_kernel.cuh, 8 warps over 128 keys x 128 queries in 32 x 64 / 32 x 32
//            warp tiles, P and dS through shared memory, 1 CTA/SM: at T=4096 2.17 ms against 2.51
//            for the 4-warp kernel below; a 64-query tile was slower at every T measured
//   backward D=64:  kBlockN=64 keys (4 warps x 16 keys), kBlockM=32 queries, 3 CTAs/SM (<= 168
//            registers): occupancy beats fragment reuse here. At T=4096: 2.95 ms, against 3.38 ms
//            for 4 warps x 2 x 16 keys with 2 CTAs/SM and 3.6 ms for 8 warps x 16 keys, 1 CTA/SM
//            (session 1); the deterministic modes and shorter T use it
//   backward D=128, atomic and fixed-point dQ, T >= 4096 (2048 with dropout; flash_bwd_wide_min_t(128, .)):
//            the wide kernel at 64 queries x 128 keys (FlashConfig<128>::BwdWide). H100 bwd ms
//            against the 4-warp kernel: T = 4096 2.331 / 2.455 (p = 0), 2.610 / 2.819 (p = 0.1);
//            T = 16384 7.43 / 8.28, 8.28 / 9.59 (session 14)
//   backward D=128 elsewhere: kBlockN=64 keys (4 warps x 16), kBlockM=32 queries, K/V re-read from smem
// Launch order (both directions, D=64): a 1-D grid walked in groups of 32768 / T heads, longest
// causal blocks first inside a group (grouped_block_order): 2-4% on fwd+bwd at T >= 2048 against
// one head at a time; all heads longest-first lost (L2). D=128 keeps one head per group.
// Deterministic backward (flash_fixed_point_dq picks the form): the atomic backward's kernels and
// launch order with fixed-point dQ adds (kFixedDq), or the ordered form; without dropout: the dK/dV
// kernel without its dQ phase, then a dQ kernel shaped like the forward (64-row tile as FwdSmallT);
// with dropout: the counter-ordered dQ, whose key blocks launch in descending order inside the same
// groups (shortest causal block first: the order in which they add into dQ; flash_bwd_kernel.cuh
// says why).
#pragma once

#include <algorithm>
#include <type_traits>

#include "core/cuda/check.h"
#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_bwd_dq_kernel.cuh"
#include "ops/cuda/attention/flash_bwd_kernel.cuh"
#include "ops/cuda/attention/flash_bwd_preprocess.cuh"
#include "ops/cuda/attention/flash_bwd_wide_kernel.cuh"
#include "ops/cuda/attention/flash_fwd_kernel.cuh"
#include "ops/cuda/attention/flash_fwd_wgmma_kernel.cuh"
#include "ops/cuda/attention/flash_launch_common.h"
#include "ops/cuda/attention/flash_run.h"
#include "ops/cuda/attention/flash_traits.h"

namespace ft::cuda::flash {

template <int kHeadDim>
struct FlashConfig;
template <>
struct FlashConfig<64> {
  // CTA launch order (grouped_block_order): heads per group = kGroupTokens / T (0: one head).
  static constexpr int kGroupTokens = 32768;
  static constexpr int kSmallT = 2048;  // T <= kSmallT: FwdSmallT (more, smaller CTAs)
  using Fwd = FlashFwdTraits<64, 128, 64, 4, 2>;
  using FwdSmallT = FlashFwdTraits<64, 64, 64, 4, 3>;
  using FwdDropout = FwdSmallT;
  using Bwd = FlashBwdTraits<64, 32, 64, 4, false, 3, 1>;
  using BwdWide = FlashBwdWideTraits<64>;  // atomic / fixed-point dQ, T >= flash_bwd_wide_min_t(64, dropout)
  using BwdDq = FlashFwdTraits<64, 64, 64, 4, 3>;  // the split deterministic backward's dQ kernel
  // sm_90a (flash_wgmma_enabled): two warpgroups x 64 query rows share 64-key K/V tiles (3 stages),
  // 2 CTAs/SM, every T and dropout (bench/attention/NOTES.md, session 4); three of the four dropout
  // Philox calls of a tile drawn while S is computed (session 8).
  using FwdWgmma = FlashFwdWgmmaTraits<64, 64, 3, 2, 2, true, 3>;
  // T <= flash_fwd_small_tile_max_t (2048, with dropout 4096): one warpgroup x 64 query rows.
  // Without dropout 4 CTAs/SM (2 stages, 128 registers; H200 fwd ms against 3 CTAs/SM with 4
  // stages: T = 1024 0.207 / 0.241, T = 2048 0.347 / 0.370, session 9). With dropout 4 stages,
  // 3 CTAs/SM (160 registers; at 4 CTAs/SM T = 2048 took 0.584 against 0.563 ms), all four
  // Philox calls of a tile drawn during S (session 8), and the lazy rescale (kLazyRescale;
  // T = 2048 0.563-0.570 -> 0.553-0.555 ms; without dropout it lost 1-3%).
  using FwdWgmmaSmallT = FlashFwdWgmmaTraits<64, 64, 2, 4, 1, true, 4>;
  using FwdWgmmaSmallTDropout = FlashFwdWgmmaTraits<64, 64, 4, 3, 1, true, 4, true>;
};
template <>
struct FlashConfig<128> {
  static constexpr int kGroupTokens = 0;  // not measured at D = 128: the original order
  static constexpr int kSmallT = 0;
  using Fwd = FlashFwdTraits<128, 128, 64, 8, 1>;
  using FwdSmallT = Fwd;
  using FwdDropout = Fwd;
  using Bwd = FlashBwdTraits<128, 32, 64, 4, false, 1, 1>;
  // From flash_bwd_wide_min_t(128, dropout) on: 64 queries x 128 keys (FlashAttention-2's hdim-128 tile),
  // 171 KiB of shared memory, 255 registers (dK, dV are 128 of them) with 12-44 bytes of spill
  // without dropout and 68-100 with it (ptxas, sm_90a, CUDA 13.0). It still beats the spill-free
  // 128 queries x 64 keys (208 KiB, 250-255 registers; benchmark variants 37, 38): H100 bwd ms,
  // 64 x 128 / 128 x 64 / 4-warp, p = 0.1, T = 4096 2.598 / 2.795 / 2.801, T = 16384 8.28 / 9.34 /
  // 9.31 (session 14). 64 x 64 (121 KiB, 200-243 registers) and kDqCols 32 were not timed.
  using BwdWide = FlashBwdWideTraits<128, 64, 128>;
  using BwdDq = FlashFwdTraits<128, 64, 64, 4, 1>;
  // sm_90a (flash_wgmma_enabled; not timed yet): rows of two 64-column panels, 64-key tiles. O is 64
  // of a thread's registers, S 32: one CTA/SM of two warpgroups (Q 32 KiB + 3 stages x 32 KiB of K
  // and V), and up to flash_fwd_small_tile_max_t one warpgroup, 2 CTAs/SM (Q 16 KiB + 2 stages).
  using FwdWgmma = FlashFwdWgmmaTraits<128, 64, 3, 1, 2, true, 2>;
  using FwdWgmmaSmallT = FlashFwdWgmmaTraits<128, 64, 2, 2, 1, true, 2>;
  using FwdWgmmaSmallTDropout = FwdWgmmaSmallT;
};

// D = 256 (not timed yet; close to FlashAttention-2's hdim-256 tiles). Registers: a warp's 16 rows x
// 256 columns of fp32 accumulator are 128 registers a thread, so nothing else D-wide stays in
// registers. Register counts from ptxas -v (sm_90a, CUDA 13.0).
//   forward: kBlockM=128, kBlockN=32, 8 warps x 16 rows, Q re-read from shared memory per key tile
//            (kQInRegs false: Q's fragments would be 64 more registers); shared memory
//            (128 + 4 x 32) x 264 x 2 B = 132 KiB, 1 CTA/SM; 245-246 registers, no spills. With
//            kBlockN=64 (198 KiB) it took 255 registers and spilled 20-40 bytes (S is 32 more).
//   backward: flash_bwd_wide_kernel.cuh at kBlockM=64 queries x kBlockN=64 keys, 8 warps: dK and dV
//            split over the warps as 4 (keys) x 2 (dims), 16 x 128 each, 128 registers for both
//            (the 4-warp kernel would hold 16 x 256 of each, 256 registers); shared memory K, V
//            64 x 264 x 2 B each, Q and dO x 2 stages 64 x 264 x 2 B each, P and dS 64 x 72 x 2 B
//            each, lse and D 1 KiB: 217 KiB of the 227 KiB an H100 CTA may opt into (an A100's
//            163 KiB is too little: D = 256 is a Hopper-only head dim here). 254-255 registers; no
//            spills without dropout, 64 bytes with it (28 with the ordered dQ). Its dQ phase runs in
//            passes of 64 columns (kDqCols; flash_bwd_wide_kernel.cuh).
//   deterministic backward without dropout: the split backward (the wide tile without its dQ
//            phase, 254-255 registers, no spills; then the dQ kernel at kBlockM=128, kBlockN=32,
//            8 warps, Q and dO from shared memory: (2 x 128 + 4 x 32) x 264 x 2 B = 198 KiB, 243-244
//            registers, no spills); with dropout the wide tile with the counter-ordered dQ (each
//            warp's 16-row x 128-column dQ slab has its own counter).
template <>
struct FlashConfig<256> {
  static constexpr int kGroupTokens = 0;  // not measured at D = 256: the original order
  using Fwd = FlashFwdTraits<256, 128, 32, 8, 1, false>;
  using BwdWide = FlashBwdWideTraits<256, 64, 64>;
  using BwdDq = FlashFwdTraits<256, 128, 32, 8, 1, false>;
};

// Whether a backward traits type is the wide tile's (flash_bwd_wide_kernel.cuh).
template <class Kt>
struct IsWideBwd : std::false_type {};
template <int kHeadDim, int kBlockM, int kBlockN, bool kWithDq>
struct IsWideBwd<FlashBwdWideTraits<kHeadDim, kBlockM, kBlockN, kWithDq>> : std::true_type {};

// Runs f(std::bool_constant<kBF16>, std::bool_constant<kDropout>, std::bool_constant<kDocMask>).
// The document mask is a template flag rather than a runtime test inside the kernels because the
// test alone cost the dense D = 64 kernels registers and spills (attention_params.h); the op takes
// it only with causal attention, but causal is a runtime flag, so every dense kernel has a
// document-mask twin.
template <class F>
void dispatch_kernel_flags(const AttentionParams& p, F&& f) {
  const bool bf16 = p.dtype == AttentionDType::kBF16;
  const bool dropout = p.dropout.threshold != 0;
  auto with_doc_mask = [&](auto kbf16, auto kdropout) {
    if (p.doc_start != nullptr) f(kbf16, kdropout, std::true_type{});
    else f(kbf16, kdropout, std::false_type{});
  };
  if (bf16) {
    if (dropout) with_doc_mask(std::true_type{}, std::true_type{});
    else with_doc_mask(std::true_type{}, std::false_type{});
  } else {
    if (dropout) with_doc_mask(std::false_type{}, std::true_type{});
    else with_doc_mask(std::false_type{}, std::false_type{});
  }
}

template <class Kt, bool kBF16, bool kDropout, bool kDocMask = false>
void launch_flash_fwd(const AttentionParams& p, cudaStream_t stream, int group_tokens) {
  check_doc_mask_built<kDocMask>(p);
  launch_query_major<Kt>(flash_fwd_kernel<Kt, kBF16, kDropout, kDocMask>, Kt::kSmemBytes, p, stream, group_tokens);
}

// One tile shape for every (dtype, dropout, document mask): used by the benchmark's tuning variants.
template <class Kt>
void run_flash_fwd_with(const AttentionParams& p, cudaStream_t stream, int group_tokens = 0) {
  dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto doc_mask) {
    launch_flash_fwd<Kt, decltype(bf16)::value, decltype(dropout)::value, decltype(doc_mask)::value>(p, stream,
                                                                                                     group_tokens);
  });
}

// The backward's small kernels (flash_bwd_preprocess.cuh): the preprocess has one thread per 8
// elements of a row, the dQ conversion one per 16-byte chunk of dq_accum.
template <int kHeadDim>
struct BwdRowKernels {
  static constexpr int kThreads = 256;
  int64_t accum_floats;  // the fp32 dq_accum's floats (the fixed-point one: fixed_floats)
  int64_t fixed_floats;
  unsigned blocks, convert_blocks;
  explicit BwdRowKernels(const AttentionParams& p)
      : accum_floats(dq_accum_float_count(static_cast<int64_t>(p.B) * p.H, p.T, kHeadDim)),
        fixed_floats(dq_fixed_float_count(static_cast<int64_t>(p.B) * p.H, p.T, kHeadDim)) {
    const int64_t row_threads = static_cast<int64_t>(p.B) * p.H * p.T * (kHeadDim / 8);
    blocks = static_cast<unsigned>((row_threads + kThreads - 1) / kThreads);
    // Exact: dq_accum's rows per head are a multiple of 128, so its chunks a multiple of 256.
    static_assert(kThreads == kConvertThreads, "one convert thread per chunk of a 256-chunk block");
    convert_blocks = static_cast<unsigned>(accum_floats / 4 / kConvertThreads);
  }
  // n_accum: the dq_accum floats to zero (0: none).
  template <bool kBF16>
  void preprocess(const AttentionParams& p, cudaStream_t stream, int* semaphores, int64_t n_semaphores,
                  int64_t n_accum) const {
    flash_bwd_preprocess_kernel<kHeadDim, kBF16><<<blocks, kThreads, 0, stream>>>(p, semaphores, n_semaphores,
                                                                                   n_accum);
    CUDA_CHECK_LAUNCH();
  }
  // The floats the preprocess zeroes for a main kernel that adds into dq_accum.
  int64_t accum_to_zero(bool fixed_dq) const { return fixed_dq ? fixed_floats : accum_floats; }
  template <bool kBF16, bool kFixedDq>
  void convert_dq(const AttentionParams& p, cudaStream_t stream) const {
    flash_bwd_convert_dq_kernel<kHeadDim, kBF16, kFixedDq><<<convert_blocks, kThreads, 0, stream>>>(p);
    CUDA_CHECK_LAUNCH();
  }
};

template <class Kt, bool kBF16, bool kDropout, bool kOrderedDq = false, bool kDocMask = false,
          bool kFixedDq = false>
void launch_flash_bwd(const AttentionParams& p, cudaStream_t stream, int group_tokens,
                      int* dq_semaphore = nullptr) {
  constexpr int kHeadDim = Kt::kHeadDim;
  static_assert(!kOrderedDq || (Kt::kBlockM == kFlashDqTileRows && Kt::kNWarps == kFlashDqSemaphoresPerTile),
                "the dQ counters (flash_attention.h) are sized for 32-query tiles of 4 warps");
  static_assert(DqAccumLayout<kHeadDim>::kRowAlign % Kt::kBlockM == 0, "dq_accum rows cover whole tiles");
  check_grid(p);
  check_doc_mask_built<kDocMask>(p);
  const BwdRowKernels<kHeadDim> rows(p);
  const int64_t n_semaphores =
      kOrderedDq ? flash_attention_backward_workspace(p).dq_semaphore_ints : 0;
  rows.template preprocess<kBF16>(p, stream, dq_semaphore, n_semaphores, rows.accum_to_zero(kFixedDq));
  launch_key_major<Kt>(flash_bwd_kernel<Kt, kBF16, kDropout, kOrderedDq, kDocMask, kFixedDq>, Kt::kSmemBytes, p,
                       stream, group_tokens, dq_semaphore);
  rows.template convert_dq<kBF16, kFixedDq>(p, stream);
}

// The wide-tile backward (flash_bwd_wide_kernel.cuh): atomic dQ, (kOrderedDq) the counter-ordered dQ,
// or (kFixedDq) the fixed-point one.
template <class Kt, bool kBF16, bool kDropout, bool kOrderedDq = false, bool kDocMask = false,
          bool kFixedDq = false>
void launch_flash_bwd_wide(const AttentionParams& p, cudaStream_t stream, int group_tokens,
                           int* dq_semaphore = nullptr) {
  static_assert(DqAccumLayout<Kt::kHeadDim>::kRowAlign % Kt::kBlockM == 0, "dq_accum rows cover whole tiles");
  static_assert(!kOrderedDq || (Kt::kMQ == 16 && kFlashDqTileRows == 32 && kFlashDqSemaphoresPerTile == 4),
                "the dQ counters (flash_attention.h): one per 16-row slab and column half, 4 per 32 rows");
  check_grid(p);
  check_doc_mask_built<kDocMask>(p);
  const BwdRowKernels<Kt::kHeadDim> rows(p);
  const int64_t n_semaphores = kOrderedDq ? flash_attention_backward_workspace(p).dq_semaphore_ints : 0;
  rows.template preprocess<kBF16>(p, stream, dq_semaphore, n_semaphores, rows.accum_to_zero(kFixedDq));
  launch_key_major<Kt>(flash_bwd_wide_kernel<Kt, kBF16, kDropout, kOrderedDq, kDocMask, kFixedDq>, Kt::kSmemBytes,
                       p, stream, group_tokens, dq_semaphore);
  rows.template convert_dq<kBF16, kFixedDq>(p, stream);
}

// The split deterministic backward: dK, dV from the main kernel (Kt: the 4-warp or the wide tile)
// without its dQ phase (longest key blocks first, no counters), then dQ from flash_bwd_dq_kernel
// (KtDq: a forward-shaped tile).
template <class Kt, class KtDq, bool kBF16, bool kDropout, bool kDocMask = false>
void launch_flash_bwd_split(const AttentionParams& p, cudaStream_t stream, int group_tokens) {
  constexpr int kHeadDim = Kt::kHeadDim;
  static_assert(KtDq::kHeadDim == kHeadDim, "one head dim");
  check_grid(p);
  check_doc_mask_built<kDocMask>(p);
  BwdRowKernels<kHeadDim>(p).template preprocess<kBF16>(p, stream, nullptr, 0, 0);
  if constexpr (IsWideBwd<Kt>::value) {
    using KtNoDq = FlashBwdWideNoDq<Kt>;
    launch_key_major<KtNoDq>(flash_bwd_wide_kernel<KtNoDq, kBF16, kDropout, false, kDocMask>, KtNoDq::kSmemBytes,
                             p, stream, group_tokens, nullptr);
  } else {
    using KtNoDq = FlashBwdNoDq<Kt>;
    launch_key_major<KtNoDq>(flash_bwd_kernel<KtNoDq, kBF16, kDropout, false, kDocMask>, KtNoDq::kSmemBytes, p,
                             stream, group_tokens, nullptr);
  }
  launch_query_major<KtDq>(flash_bwd_dq_kernel<KtDq, kBF16, kDropout, kDocMask>, flash_bwd_dq_smem_bytes<KtDq>(),
                           p, stream, group_tokens);
}

// Deterministic: the fixed-point dQ where it is faster (flash_fixed_point_dq); else the ordered form,
// without dropout the split backward and with dropout the counter-ordered dQ, each the faster of the
// two there (H200, T = 1024 .. 16384: bench/attention/NOTES.md, D = 64): the split recomputes S and
// dP, which costs less than the ordering's waits, unless the dropout bits must be drawn a third time
// as well. Kt: the 4-warp tile, or the wide one (D = 256).
template <class Kt>
void run_flash_bwd_with(const AttentionParams& p, cudaStream_t stream, int group_tokens = 0,
                        const FlashBackwardMode& mode = {}) {
  dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto doc_mask) {
    constexpr bool kBF16 = decltype(bf16)::value, kDropout = decltype(dropout)::value;
    constexpr bool kDoc = decltype(doc_mask)::value;
    constexpr bool kWide = IsWideBwd<Kt>::value;
    if (!mode.deterministic) {
      if constexpr (kWide) launch_flash_bwd_wide<Kt, kBF16, kDropout, false, kDoc>(p, stream, group_tokens);
      else launch_flash_bwd<Kt, kBF16, kDropout, false, kDoc>(p, stream, group_tokens);
    } else if (flash_fixed_point_dq(p)) {
      if constexpr (kWide) launch_flash_bwd_wide<Kt, kBF16, kDropout, false, kDoc, true>(p, stream, group_tokens);
      else launch_flash_bwd<Kt, kBF16, kDropout, false, kDoc, true>(p, stream, group_tokens);
    } else if constexpr (kDropout) {
      if constexpr (kWide)
        launch_flash_bwd_wide<Kt, kBF16, true, true, kDoc>(p, stream, group_tokens, mode.dq_semaphore);
      else launch_flash_bwd<Kt, kBF16, true, true, kDoc>(p, stream, group_tokens, mode.dq_semaphore);
    } else {
      launch_flash_bwd_split<Kt, typename FlashConfig<Kt::kHeadDim>::BwdDq, kBF16, false, kDoc>(p, stream,
                                                                                               group_tokens);
    }
  });
}

template <int kHeadDim>
void run_flash_fwd(const AttentionParams& p, cudaStream_t stream) {
  using Config = FlashConfig<kHeadDim>;
  // The warp-specialised Hopper forward from flash_fwd_ws_min_t on (D = 128: T >= 1024; D = 64: 2048),
  // persistent causal up to T = 8192, non-causal up to 4096 (flash_fwd_ws_persistent).
  if constexpr (kHeadDim == 64 || kHeadDim == 128)
    if (flash_fwd_ws_applies(p))
      return run_flash_fwd_ws(p, stream, flash_fwd_ws_form(kHeadDim, flash_fwd_ws_persistent(p.T, p.causal)));
  [[maybe_unused]] const bool wgmma = kHeadDim <= 128 && flash_wgmma_enabled();
  dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto doc_mask) {
    constexpr bool kBF16 = decltype(bf16)::value, kDropout = decltype(dropout)::value;
    constexpr bool kDoc = decltype(doc_mask)::value;
    if constexpr (kHeadDim <= 128) {  // D = 64 and 128: the wgmma forward where it runs
      if (wgmma && p.T <= flash_fwd_small_tile_max_t(kDropout)) {
        using Small = std::conditional_t<kDropout, typename Config::FwdWgmmaSmallTDropout,
                                         typename Config::FwdWgmmaSmallT>;
        return launch_flash_fwd_wgmma<Small, kBF16, kDropout, kDoc>(p, stream, Config::kGroupTokens);
      }
      if (wgmma)
        return launch_flash_fwd_wgmma<typename Config::FwdWgmma, kBF16, kDropout, kDoc>(p, stream,
                                                                                        Config::kGroupTokens);
    }
    if constexpr (kHeadDim == 256) {
      launch_flash_fwd<typename Config::Fwd, kBF16, kDropout, kDoc>(p, stream, Config::kGroupTokens);
    } else if constexpr (kDropout) {
      launch_flash_fwd<typename Config::FwdDropout, kBF16, true, kDoc>(p, stream, Config::kGroupTokens);
    } else if (p.T <= Config::kSmallT) {
      launch_flash_fwd<typename Config::FwdSmallT, kBF16, false, kDoc>(p, stream, Config::kGroupTokens);
    } else {
      launch_flash_fwd<typename Config::Fwd, kBF16, false, kDoc>(p, stream, Config::kGroupTokens);
    }
  });
}
template <int kHeadDim>
void run_flash_bwd(const AttentionParams& p, cudaStream_t stream, const FlashBackwardMode& mode) {
  using Config = FlashConfig<kHeadDim>;
  // The warp-specialised Hopper backward from flash_bwd_ws_min_t on (default 1024; flash_attention.cu has the numbers).
  if constexpr (kHeadDim == 64 || kHeadDim == 128)
    if (flash_bwd_ws_applies(p, mode)) return run_flash_bwd_ws(p, stream, mode);
  if constexpr (kHeadDim == 64 || kHeadDim == 128) {
    // The fixed-point deterministic dQ adds in any order, so it takes the atomic backward's kernels.
    const bool fixed = mode.deterministic && flash_fixed_point_dq(p);
    if ((!mode.deterministic || fixed) && p.T >= flash_bwd_wide_min_t(kHeadDim, p.dropout.threshold != 0)) {
      return dispatch_kernel_flags(p, [&](auto bf16, auto dropout, auto doc_mask) {
        using W = typename Config::BwdWide;
        constexpr bool kB = decltype(bf16)::value, kP = decltype(dropout)::value, kM = decltype(doc_mask)::value;
        if (fixed) launch_flash_bwd_wide<W, kB, kP, false, kM, true>(p, stream, Config::kGroupTokens);
        else launch_flash_bwd_wide<W, kB, kP, false, kM>(p, stream, Config::kGroupTokens);
      });
    }
  }
  if constexpr (kHeadDim == 256) run_flash_bwd_with<typename Config::BwdWide>(p, stream, Config::kGroupTokens, mode);
  else run_flash_bwd_with<typename Config::Bwd>(p, stream, Config::kGroupTokens, mode);
}

}  // namespace ft::cuda::flash
