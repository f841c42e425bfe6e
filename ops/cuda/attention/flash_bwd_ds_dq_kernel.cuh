// dQ = softmax_scale * dS K from the stored dS (sm_90a, D = 64 and 128): the second kernel of the
// deterministic backward's kStoredDs form (flash_ds_store.cuh says why and how dS is laid out).
//
// One CTA per pair of query tiles (2 j, 2 j + 1; 64 rows each) of one batch * head, one warpgroup a
// tile. Thread 0 streams the key blocks either tile sees through a kStages ring: each stage holds the
// 128 K rows of the block (TMA, the backward's tensor map, zero rows past T) and each tile's dS^T of
// it (16 KiB, a 1-D bulk copy, already swizzled), completing on the stage's mbarrier. Each warpgroup
// adds its tile as 8 k-steps of m64 wgmma (A = dS^T read transposed, B = K read transposed) into one
// fp32 accumulator in ascending key-block order: every dQ element is the same sum in the same order
// on every run, with no atomics. The tiles a row visits are exactly those the backward wrote (the same
// attention_tile_kind test per pair of tile and block).
// Why pairs: K's bytes are twice dS's at D = 128, and with a CTA a tile every tile re-read them (from
// L2), about 2.4 GB a call at T = 4096 (B 8, H 6). A pair reads each K block once for two tiles, which
// under a causal mask see the same key blocks (0 .. j: keys 128 n <= queries 64 (2 j) + 63 and
// 64 (2 j + 1) + 63 alike). H200, session 34, ncu, us, pairs / a tile a CTA: D = 128 T = 4096 358.8 /
// 382.8, D = 64 526.6 / 634.0 -- less than K's halved bytes promised, so L2 was not (all of) the limit.
#pragma once

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_ds_store.cuh"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"
#include "ops/cuda/attention/flash_tma.cuh"
#include "ops/cuda/attention/flash_tma_map.h"
#include "ops/cuda/attention/flash_wgmma.cuh"

namespace ft::cuda::flash {

template <int kHeadDim_>
struct FlashDsDqTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kPanels = kHeadDim / 64;
  static constexpr int kBlockM = kDsTileQueries, kBlockN = kDsTileKeys;
  static constexpr int kTiles = 2;  // query tiles a CTA, one warpgroup each, sharing each K block
  static constexpr int kNThreads = 128 * kTiles;
  // Stages: two at D = 64 (96 KiB, two CTAs per SM), three at D = 128 (192 KiB); first guesses.
  static constexpr int kStages = kHeadDim == 64 ? 2 : 3;
  static constexpr int kKBytes = kBlockN * kHeadDim * 2;
  static constexpr int kStageBytes = kTiles * kDsTileBytes + kKBytes;  // the tiles' dS^T first, then K's panels
  static constexpr uint32_t kKPanelUnits = kBlockN * 128 / 16;
  static constexpr int kSmemBytes = 1024 /* alignment */ + kStages * kStageBytes + kStages * 8;
  static_assert(kBlockM * kHeadDim * 2 <= kDsTileBytes, "dQ is staged in its tile's stage-0 dS buffer");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  // Heads in flight at once (grouped_block_order): T x heads = this many tokens, whose K (8 MiB at
  // D = 128) stays in L2 while the longest rows of every head of the group go first.
  static constexpr int kGroupTokens = 32768;
  // Groups of kTiles query tiles (the last one may be short) of one (batch, head); a CTA each.
  static constexpr int pairs(int T) { return (ds_query_tiles(T) + kTiles - 1) / kTiles; }
  static constexpr int64_t grid(int T, int64_t bh) { return pairs(T) * bh; }
};

template <int kHeadDim, bool kBF16>
__global__ void __launch_bounds__(FlashDsDqTraits<kHeadDim>::kNThreads)
    flash_bwd_ds_dq_kernel(const __grid_constant__ FlashBwdTmaMaps maps, const AttentionParams p, int heads_per_group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Kt = FlashDsDqTraits<kHeadDim>;
  constexpr int D = kHeadDim, BM = Kt::kBlockM, BN = Kt::kBlockN, kStages = Kt::kStages, kTiles = Kt::kTiles;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);  // swizzled tiles: 1 KiB aligned
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * Kt::kStageBytes);
  auto stage_ds = [&](int s, int t) { return smem + s * Kt::kStageBytes + t * kDsTileBytes; };
  auto stage_k = [&](int s) { return smem + s * Kt::kStageBytes + kTiles * kDsTileBytes; };

  // The longest causal rows first (the pairs of the last query tiles), in groups of heads_per_group
  // heads (grouped_block_order, kGroupTokens), so that the CTAs in flight read the K of a few heads,
  // which stays in L2. Over every head at once (the order before), ncu put the L2 hit rate at 24.7%
  // with dS streaming through, DRAM 68% busy and L2 83% (H200, D = 128, T = 4096, session 34); in
  // groups, ncu, us, grouped / not: D = 128 T = 1024 128.2 / 148.0, T = 4096 331.5 / 359.5, T = 16384
  // 1131.0 / 1128.5; D = 64 T = 4096 435.2 / 526.9.
  const int T = p.T, BH = p.B * p.H, m_blocks = ds_query_tiles(T), n_blocks = ds_key_blocks(T);
  const int pairs = Kt::pairs(T);
  const BlockOrder order = grouped_block_order(static_cast<int>(blockIdx.x), pairs, BH, heads_per_group);
  const int m_first = (pairs - 1 - order.rank) * kTiles;
  const int bh = order.bh, b = bh / p.H, h = bh % p.H;
  const int hk = attention_kv_head(p, h);
  const int tid = threadIdx.x;
  const int warp = warp_index_uniform(), lane = tid % 32, wg = warp / 4;
  const int m = m_first + wg, m0 = m * BM;  // this warpgroup's tile (m >= m_blocks: none)
  const uint8_t* ds_base = reinterpret_cast<const uint8_t*>(p.dq_accum);
  auto sees = [&](int mt, int n) {  // whether query tile mt has a (non-empty, so stored) tile at key block n
    return mt < m_blocks && attention_tile_kind<false>(p, b, mt * BM, min(mt * BM + BM, T), n * BN,
                                                       min(n * BN + BN, T)) != kTileEmpty;
  };
  auto next_block = [&](int n) {  // the first key block >= n that either tile of the pair sees
    for (; n < n_blocks; ++n)
      if (sees(m_first, n) || sees(m_first + 1, n)) break;
    return n;
  };
  auto load = [&](int s, int n) {  // thread 0
    bool seen[kTiles];
    int bytes = Kt::kKBytes;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      seen[t] = sees(m_first + t, n);
      bytes += seen[t] ? kDsTileBytes : 0;
    }
    mbarrier_arrive_expect_tx(&full[s], bytes);
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
      if (seen[t])
        bulk_load(stage_ds(s, t), ds_base + ds_tile_offset(bh, m_first + t, n, T, p.causal), kDsTileBytes, &full[s]);
#pragma unroll
    for (int pn = 0; pn < Kt::kPanels; ++pn)
      tma_load_4d(stage_k(s) + pn * BN * 128, &maps.k, &full[s], 64 * pn, n * BN, hk, b);
  };

  // Thread 0 keeps the ring full: `issued` is the next block to load, one stage ahead of the
  // consumers per stage.
  int issued = next_block(0);
  if (tid == 0) {
    tma_prefetch_map(&maps.k);
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
    fence_mbarrier_init();
    for (int s = 0; s < kStages && issued < n_blocks; ++s, issued = next_block(issued + 1)) load(s, issued);
  }
  __syncthreads();
  if (tid != 0) issued = n_blocks;  // only thread 0 issues

  float acc[D / 8][4];
  zero_fragments(acc);
  int j = 0;  // blocks consumed
  for (int n = next_block(0); n < n_blocks; n = next_block(n + 1), ++j) {
    const int s = j % kStages;
    mbarrier_wait(&full[s], (j / kStages) & 1, "full (ds dq), block", n);
    if (sees(m, n)) {  // uniform in the warpgroup
      const uint32_t ds_lo = wgmma_desc_sw128_lo(smem_u32(stage_ds(s, wg)));
      const uint32_t k_lo = wgmma_desc_sw128_lo(smem_u32(stage_k(s)));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk)  // 16 keys a step: 16 rows of dS^T (2 KiB), of each K panel
        // D = 128: one n128 over both panels (flash_bwd_ws_kernel.cuh's kN128Dq)
        wgmma_ss_transposed_b_step<Kt::kPanels, kBF16, true, Kt::kPanels == 2>(
            acc, wgmma_desc_sw128_from_lo(ds_lo + 128 * kk), k_lo + 128 * kk, Kt::kKPanelUnits);
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(acc);
    }
    // Both warpgroups' products have read stage s before thread 0 refills it.
    named_barrier_sync(1, Kt::kNThreads);
    if (tid == 0 && issued < n_blocks) {
      load(s, issued);
      issued = next_block(issued + 1);
    }
  }
  if (m >= m_blocks) return;  // the second tile of a pair past the last (no barrier follows)

  // dQ * softmax_scale through this tile's stage-0 dS buffer (every product is done: the last barrier
  // above; a row with no tile never touched it), then 16-byte stores of rows < T.
  uint8_t* sOut = stage_ds(0, wg);
  auto at = [&](int r, int col) { return reinterpret_cast<uint16_t*>(sOut + sw128_panel_offset<BM, D>(r, col)); };
  const int warp_in_wg = warp % 4;
  stage_rows<kBF16, D>(acc, p.softmax_scale, 16 * warp_in_wg, at, lane);
  __syncwarp();
  uint16_t* dq = static_cast<uint16_t*>(p.dq) + b * p.dq_batch_stride + h * p.dq_head_stride;
  store_staged_rows<16, D>(dq, p.dq_row_stride, 16 * warp_in_wg, m0, T, at, lane);
#else
  __trap();  // built without sm_90a: the launcher never picks this kernel there
#endif
}

}  // namespace ft::cuda::flash
