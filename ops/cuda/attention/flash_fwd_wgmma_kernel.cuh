// Flash attention forward on Hopper warpgroup MMAs (wgmma, sm_90a), D = 64 and 128.
//
// The same algorithm as flash_fwd_kernel.cuh (online softmax, causal / block-sparse tiles skipped,
// dropout keep bits drawn in registers, only O and lse written); what changes is who reads shared
// memory. With mma.sync every warp loads its own copy of each K and V fragment from shared memory
// (the forward's K/V tile is read 4 times per CTA); here each warpgroup's wgmmas read Q, K and V
// straight from 128-byte-swizzled shared memory (flash_wgmma.cuh), and they run asynchronously:
//   S = Q K^T   wgmma m64 n kBN k16, A = this warpgroup's 64 rows of Q (shared memory)
//   P = online softmax of S (per warp, in the mma.sync accumulator layout, as before)
//   O += P V    wgmma m64 n64 k16, A = P from registers, B = V read transposed
// At D = 128 the rows of Q, K and V are two 64-column panels (flash_wgmma.cuh): S = Q K^T takes 8
// k steps, panel 0 then panel 1, and O += P V two n64 products per k step, one per panel of V
// (columns 0-63 and 64-127 of O), or with kPvN128 one n128 product over both panels (its
// descriptor's leading byte offset is the panel stride; an experiment until checked on a GPU).
// Unless kWaitPv, O += P V is not waited for: it runs while the warps go on to the next tile's
// barrier, issue the next S, and draw the next tile's dropout bits; the wait for S waits for it too.
// K/V tiles stream through kStages shared-memory stages, loaded kPrefetch tiles ahead: the stage a
// prefetch overwrites was last read by an O += P V that every warp has waited for before the
// barrier that precedes the prefetch.
#pragma once

#include <cfloat>
#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_launch_common.h"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"
#include "ops/cuda/attention/flash_wgmma.cuh"

namespace ft::cuda::flash {

// kWarpGroups warpgroups share each K/V tile (less L2 -> shared-memory traffic per query row);
// each runs its own wgmmas on its own 64 query rows.
// kWaitPv: wait for O += P V at the end of its tile instead of letting it run into the next one.
// Left running, ptxas serialises every wgmma of the kernel (warning C7515), for a reason not
// found yet (it goes away without the masking code); both forms are timed.
// kEarlyCalls: dropout Philox calls (one per 16 keys) drawn while S = Q K^T runs; the rest are drawn
// after its wait, where they are applied. With Q in registers, at kBlockN 64 and 128 registers,
// three or four before the wait spilled 24-28 bytes; with Q read from shared memory (16 registers
// fewer) three fit without spills and are the fastest (bench/attention/NOTES.md, session 8).
// kLeanLoads: a full K/V tile is loaded from per-thread source pointers and a swizzled destination
// computed once before the loop (each thread's chunks sit at the same place in every tile), not
// from the row-bounded address arithmetic of load_rows_async_sw128 (about 85 instructions per tile
// in the SASS, against 35); it needs the tile's 16-byte chunks to divide evenly among the threads.
// kLazyRescale: the online softmax keeps a row's reference maximum until the tile maximum exceeds it
// by more than kLazyRescaleLog2 (in log2 units; so P <= 2^kLazyRescaleLog2), and only then rescales
// O and the row sum, all rows of the warp together (a warp-uniform branch). Exact in exact
// arithmetic: O, the row sum and the lse all refer to the same (stale) maximum.
// kHeadDim: 64 or 128 (one or two 64-column panels a row). kPvN128 (D = 128): O += P V as one n128
// product per k step instead of one n64 per panel.
template <int kHeadDim_, int kBlockN_, int kStages_, int kMinBlocksPerSm_, int kWarpGroups_ = 1,
          bool kWaitPv_ = true, int kEarlyCalls_ = 2, bool kLazyRescale_ = false, bool kPvN128_ = false>
struct FlashFwdWgmmaTraits {
  static constexpr bool kPvN128 = kPvN128_;
  static constexpr bool kLazyRescale = kLazyRescale_;
  static constexpr float kLazyRescaleLog2 = 8.f;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kPanels = kHeadDim / 64;
  // Lean loads: every thread's chunks sit in one column (kNThreads is a multiple of a row's
  // kHeadDim / 8 chunks) and 8-row multiples apart (the swizzle repeats every 8 rows).
  static constexpr bool kLeanLoads = (kBlockN_ * kHeadDim / 8) % (128 * kWarpGroups_) == 0 &&
                                     (128 * kWarpGroups_ / (kHeadDim / 8)) % 8 == 0;
  static constexpr int kEarlyCalls = kEarlyCalls_ < kBlockN_ / 16 ? kEarlyCalls_ : kBlockN_ / 16;
  static constexpr bool kWaitPv = kWaitPv_;
  static constexpr int kWarpGroups = kWarpGroups_;
  static constexpr int kBlockM = 64 * kWarpGroups;  // warp w: query rows 16 w .. 16 w + 15
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  // Tiles loaded ahead: the stage a prefetch overwrites was read by the tile before (kWaitPv) or
  // the one before that (its O += P V is waited for only in the next tile).
  static constexpr int kPrefetch = kWaitPv ? kStages - 1 : kStages - 2;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kNThreads = 128 * kWarpGroups;
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;  // one K or V tile
  static constexpr int kSmemBytes = 1024 /* alignment */ + kBlockM * kHeadDim * 2 + kStages * 2 * kTileBytes;
  static_assert(kPrefetch >= 1 && (kBlockN == 64 || kBlockN == 128), "wgmma forward tile");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "wgmma forward head dim");
  static_assert(!kPvN128 || kHeadDim == 128, "kPvN128: two panels");
};

// kDocMask: as flash_fwd_kernel's (no document-mask code without it, for the registers).
template <class Kt, bool kBF16, bool kDropout, bool kDocMask>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocksPerSm)
    flash_fwd_wgmma_kernel(const AttentionParams p, int heads_per_group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, NT = Kt::kNThreads;
  constexpr int kStages = Kt::kStages, kPrefetch = Kt::kPrefetch;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);  // swizzled tiles: 1 KB aligned
  // Tiles of kPanels 64-column panels (flash_wgmma.cuh).
  uint16_t* sQ = reinterpret_cast<uint16_t*>(smem);                   // BM x D (O at the end)
  uint16_t* sK = reinterpret_cast<uint16_t*>(smem + BM * D * 2);      // kStages x BN x D
  uint16_t* sV = sK + kStages * BN * D;                               // kStages x BN x D

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int T = p.T;
  const QueryBlock<BM, BN, kDocMask> blk(p, heads_per_group);
  const int bh = blk.bh, b = blk.b, m0 = blk.m0, m1 = blk.m1, n_end = blk.n_end;
  const int warp_row0 = warp * 16;
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: before any dropout_bits

  const uint16_t *q = blk.q, *k = blk.k, *v = blk.v;
  uint16_t* o = blk.o;
  auto next_tile = [&](int n) { return blk.next_key_tile(p, n); };
  // Prefetch queue: tile n_load goes into stage load_stage next.
  int n_load = next_tile(blk.n_begin), load_stage = 0;
  // kLeanLoads: this thread's 16-byte chunks are (row ld_row + i * kRoundRows, column ld_col) of
  // every tile; the rows are 8-row multiples apart, so their swizzled offsets are kRoundRows * 128
  // bytes apart too. Sources in bytes: tile n's chunk i is k_src + n * k_tile_bytes + i * k_round_bytes.
  constexpr int kRoundRows = NT / (D / 8), kRounds = Kt::kLeanLoads ? BN / kRoundRows : 0;
  const int ld_row = tid / (D / 8), ld_col = (tid % (D / 8)) * 8;
  const char* k_src = reinterpret_cast<const char*>(k + ld_row * p.k_row_stride + ld_col);
  const char* v_src = reinterpret_cast<const char*>(v + ld_row * p.v_row_stride + ld_col);
  const int64_t k_tile_bytes = 2 * BN * p.k_row_stride, v_tile_bytes = 2 * BN * p.v_row_stride;
  const int64_t k_round_bytes = 2 * kRoundRows * p.k_row_stride, v_round_bytes = 2 * kRoundRows * p.v_row_stride;
  const uint32_t ld_dst = smem_u32(sK) + sw128_panel_offset<BN, D>(ld_row, ld_col);
  auto prefetch = [&]() {
    if (n_load < n_end) {
      const int row0 = n_load * BN;
      if (Kt::kLeanLoads && row0 + BN <= T) {  // a full tile
        const char* ks = k_src + n_load * k_tile_bytes;
        const char* vs = v_src + n_load * v_tile_bytes;
        const uint32_t dst = ld_dst + load_stage * Kt::kTileBytes;
#pragma unroll
        for (int i = 0; i < kRounds; ++i) {
          cp_async_16(dst + i * kRoundRows * 128, ks + i * k_round_bytes, 16);
          cp_async_16(dst + kStages * Kt::kTileBytes + i * kRoundRows * 128, vs + i * v_round_bytes, 16);
        }
      } else {
        load_rows_async_sw128<BN, NT, D>(sK + load_stage * BN * D, k, p.k_row_stride, row0, T, tid);
        load_rows_async_sw128<BN, NT, D>(sV + load_stage * BN * D, v, p.v_row_stride, row0, T, tid);
      }
      n_load = next_tile(n_load + 1);
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
    load_stage = load_stage + 1 == kStages ? 0 : load_stage + 1;
  };

  load_rows_async_sw128<BM, NT, D>(sQ, q, p.q_row_stride, m0, T, tid);
  cp_async_commit();
#pragma unroll
  for (int i = 0; i < kPrefetch; ++i) prefetch();
  cp_async_wait<kPrefetch>();  // Q
  __syncthreads();

  float acc_o[D / 8][4];
  zero_fragments(acc_o);
  // The 8 accumulator tiles of O's columns 64 pn .. 64 pn + 63 (one n64 product's D).
  auto o_panel = [&](int pn) -> float(&)[8][4] { return *reinterpret_cast<float(*)[8][4]>(&acc_o[8 * pn]); };
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = p.softmax_scale * kLog2e;
  // Descriptor low words (flash_wgmma.cuh; offsets in 16-byte units): stage s, k-step kk of K at
  // k_desc + s kTileBytes / 16 + panel_step(kk, BN), panel pn of V's k-step kk at v_desc + s
  // kTileBytes / 16 + pn BN * 8 + 128 kk (16 rows); this warpgroup's 64 rows of Q at q_desc +
  // panel_step(kk, BM).
  const uint32_t k_desc = wgmma_desc_sw128_lo(smem_u32(sK)), v_desc = wgmma_desc_sw128_lo(smem_u32(sV));
  const uint32_t v_desc_n128 = wgmma_desc_sw128_lo_panels(smem_u32(sV), BN * 128);  // kPvN128
  const uint32_t q_desc = wgmma_desc_sw128_lo(smem_u32(sQ) + (warp / 4) * 64 * 128);
  // k-step kk of a K-major tile of kRows-row panels: panel kk / 4, 32 (kk % 4) bytes into its rows.
  auto panel_step = [](int kk, int rows) { return static_cast<uint32_t>((kk / 4) * rows * 8 + 2 * (kk % 4)); };

  int stage = 0;
  for (int n = next_tile(blk.n_begin); n < n_end; n = next_tile(n + 1)) {
    const int n0 = n * BN, n1 = min(n0 + BN, T);
    cp_async_wait<kPrefetch - 1>();  // tile n has landed (this thread's copies)
    fence_proxy_async_smem();        // ... and is visible to the tensor cores
    __syncthreads();                 // everyone's copies; every O += P V two tiles back is done
    prefetch();
    // S = Q K^T with Q from shared memory: in registers (4 ldmatrix per warp and tile, or loaded once
    // before the loop) it cost 16 registers and the address arithmetic of the ldmatrix every tile.
    float acc_s[BN / 8][4];  // the first wgmma overwrites it (scale-d 0): no zeroing in flight
    const uint32_t stage_desc = stage * (Kt::kTileBytes / 16);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      wgmma_ss<BN, kBF16>(acc_s, wgmma_desc_sw128_from_lo(q_desc + panel_step(kk, BM)),
                          wgmma_desc_sw128_from_lo(k_desc + stage_desc + panel_step(kk, BN)), kk > 0);
    wgmma_commit();

    // The dropout words of this warp's 16 x BN slab: one Philox call per lane and 16 keys, whose
    // eight pieces are the lane's own elements (dropout_tile_bits), compared where they are applied.
    // The first Kt::kEarlyCalls are drawn while S is computed, the rest after the wait.
    constexpr int kEarlyCalls = Kt::kEarlyCalls;
    PhiloxBits drop_words[BN / 16];
    if constexpr (kDropout) {
#pragma unroll
      for (int kb = 0; kb < kEarlyCalls; ++kb)
        drop_words[kb] = dropout_tile_bits(drop, bh, m0 + warp_row0, n0 + 16 * kb, lane);
    }

    wgmma_wait<0>();  // S, and the previous tile's O += P V
    reg_fence(acc_s);
    reg_fence(acc_o);

    if (attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileFull || n0 + BN > T)
      mask_slab_scores<kDocMask>(acc_s, p, b, m0 + warp_row0, n0, T, lane);

    // Online softmax, as flash_fwd_kernel.cuh.
    float new_max[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) new_max[half] = quad_row_max(acc_s, half, row_max[half]);
    auto rescale = [&](int half) {
      const float mx = new_max[half];
      const float m_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;  // all masked so far
      const float alpha = fast_exp2(row_max[half] * scale_log2 - m_scaled);
      row_max[half] = mx;
      row_sum[half] *= alpha;
#pragma unroll
      for (int dj = 0; dj < D / 8; ++dj) {
        acc_o[dj][2 * half] *= alpha;
        acc_o[dj][2 * half + 1] *= alpha;
      }
    };
    if constexpr (Kt::kLazyRescale) {
      // (-inf - -inf is NaN: a row masked so far needs nothing.)
      const bool grow = (new_max[0] - row_max[0]) * scale_log2 > Kt::kLazyRescaleLog2 ||
                        (new_max[1] - row_max[1]) * scale_log2 > Kt::kLazyRescaleLog2;
      if (__any_sync(0xffffffffu, grow)) {
        rescale(0);
        rescale(1);
      }
    } else {
      rescale(0);
      rescale(1);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float m_scaled = row_max[half] == -INFINITY ? 0.f : row_max[half] * scale_log2;
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          const float pe = fast_exp2(fmaf(acc_s[nb][e], scale_log2, -m_scaled));
          acc_s[nb][e] = pe;
          sum += pe;
        }
      row_sum[half] += sum;
    }
    if constexpr (kDropout) {
#pragma unroll
      for (int kb = kEarlyCalls; kb < BN / 16; ++kb)
        drop_words[kb] = dropout_tile_bits(drop, bh, m0 + warp_row0, n0 + 16 * kb, lane);
      const uint32_t bound = dropout_bound(drop);
#pragma unroll
      for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t word = drop_words[nb / 2].v[2 * half + nb % 2];
          acc_s[nb][2 * half] = dropout_keep_lo(word, bound) ? acc_s[nb][2 * half] : 0.f;
          acc_s[nb][2 * half + 1] = dropout_keep_hi(word, bound) ? acc_s[nb][2 * half + 1] : 0.f;
        }
    }

    // O += P V (left running unless kWaitPv).
    uint32_t pf[BN / 16][4];
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) acc_to_a<kBF16>(pf[kk], acc_s[2 * kk], acc_s[2 * kk + 1]);
    reg_fence(pf);
    reg_fence(acc_o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint32_t v_kk = v_desc + stage_desc + 128 * kk;
      if constexpr (Kt::kPanels == 1) {
        wgmma_rs<D, true, kBF16>(acc_o, pf[kk], wgmma_desc_sw128_from_lo(v_kk));
      } else if constexpr (Kt::kPvN128) {
        wgmma_rs<128, true, kBF16>(acc_o, pf[kk], wgmma_desc_sw128_from_lo(v_desc_n128 + stage_desc + 128 * kk));
      } else {
#pragma unroll
        for (int pn = 0; pn < Kt::kPanels; ++pn)  // O's columns 64 pn .. 64 pn + 63
          wgmma_rs<64, true, kBF16>(o_panel(pn), pf[kk], wgmma_desc_sw128_from_lo(v_kk + pn * BN * 8));
      }
    }
    wgmma_commit();
    if constexpr (Kt::kWaitPv) wgmma_wait<0>();
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  wgmma_wait<0>();
  reg_fence(acc_o);
  cp_async_wait<0>();

  // Epilogue, as flash_fwd_kernel.cuh: O /= l (times keep_scale), lse = m * scale + ln(l).
  const float keep_scale = kDropout ? drop.keep_scale : 1.f;
  float* lse = p.lse + static_cast<int64_t>(bh) * T;
  normalize_rows<D>(acc_o, row_sum, keep_scale);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float sum = row_sum[half];
    const int row = m0 + warp_row0 + (lane >> 2) + 8 * half;
    if ((lane & 3) == 0 && row < T)
      lse[row] = sum > 0.f ? row_max[half] * p.softmax_scale + logf(sum) : -INFINITY;
  }
  // Stage O through this warp's own rows of sQ (each warp reads only its own rows of it), then
  // 16-byte stores.
  auto at = [&](int r, int c) {
    return reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(sQ) + sw128_panel_offset<BM, D>(r, c));
  };
  stage_rows<kBF16, D>(acc_o, 1.f, warp_row0, at, lane);
  __syncwarp();
  store_staged_rows<16, D>(o, p.o_row_stride, warp_row0, m0, T, at, lane);
#else
  __trap();  // built for an architecture without wgmma; the launcher never picks this kernel there
#endif
}

template <class Kt, bool kBF16, bool kDropout, bool kDocMask = false>
void launch_flash_fwd_wgmma(const AttentionParams& p, cudaStream_t stream, int group_tokens) {
  check_doc_mask_built<kDocMask>(p);
  launch_query_major<Kt>(flash_fwd_wgmma_kernel<Kt, kBF16, kDropout, kDocMask>, Kt::kSmemBytes, p, stream,
                         group_tokens);
}

}  // namespace ft::cuda::flash
