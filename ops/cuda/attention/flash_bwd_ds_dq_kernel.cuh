// dQ = softmax_scale * dS K from the stored dS (sm_90a, D = 64 and 128): the second kernel of the
// deterministic backward's kStoredDs form (flash_ds_store.cuh says why and how dS is laid out).
//
// Work items: pairs of query tiles (2 j, 2 j + 1; 64 rows each) of one batch * head, one warpgroup a
// tile. The CTAs are persistent (one an SM), each walking its items; thread 0 streams the key blocks
// either tile of an item sees through a kStages ring that runs ahead across items: each stage holds
// the 128 K rows of the block (TMA, the backward's tensor map, zero rows past T) and each tile's dS^T
// of it (16 KiB, a 1-D bulk copy, already swizzled), completing on the stage's mbarrier. Each warpgroup
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
  // Persistent: one CTA an SM walks its pairs, its ring loading kStages blocks ahead across them.
  static constexpr int kStages = 3;
  static constexpr int kKBytes = kBlockN * kHeadDim * 2;
  static constexpr int kStageBytes = kTiles * kDsTileBytes + kKBytes;  // the tiles' dS^T first, then K's panels
  static constexpr uint32_t kKPanelUnits = kBlockN * 128 / 16;
  // A tile's dQ in the input dtype, staged for 16-byte stores in its own buffer (the ring's stages
  // are already loading the next pair's blocks when a pair ends).
  static constexpr int kOutBytes = kBlockM * kHeadDim * 2;
  static constexpr int kOffOut = kStages * kStageBytes, kOffBars = kOffOut + kTiles * kOutBytes;
  static constexpr int kSmemBytes = 1024 /* alignment */ + kOffBars + kStages * 8;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  // Heads in flight at once (grouped_block_order): T x heads = this many tokens, whose K (8 MiB at
  // D = 128) stays in L2 while the longest rows of every head of the group go first.
  static constexpr int kGroupTokens = 32768;
  // Work items of a call: pairs of query tiles x batch * head.
  static constexpr int64_t items(int T, int64_t bh) { return (ds_query_tiles(T) + kTiles - 1) / kTiles * bh; }
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
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + Kt::kOffBars);
  auto stage_ds = [&](int s, int t) { return smem + s * Kt::kStageBytes + t * kDsTileBytes; };
  auto stage_k = [&](int s) { return smem + s * Kt::kStageBytes + kTiles * kDsTileBytes; };

  // Items: pairs of query tiles of one batch * head, the longest causal rows first (the pairs of the
  // last query tiles), in groups of heads_per_group heads (grouped_block_order, kGroupTokens), so that
  // the CTAs in flight read the K of a few heads, which stays in L2. Over every head at once (the order
  // before), ncu put the L2 hit rate at 24.7% with dS streaming through, DRAM 68% busy and L2 83%
  // (H200, D = 128, T = 4096, session 34); in groups, ncu, us, grouped / not: D = 128 T = 1024 128.2 /
  // 148.0, T = 4096 331.5 / 359.5, T = 16384 1131.0 / 1128.5; D = 64 T = 4096 435.2 / 526.9. CTA c takes
  // items c, c + gridDim.x, ...
  const int T = p.T, BH = p.B * p.H, m_blocks = ds_query_tiles(T), n_blocks = ds_key_blocks(T);
  const int pairs = (m_blocks + kTiles - 1) / kTiles, n_items = pairs * BH;
  const int tid = threadIdx.x;
  // Warp-uniform (lane 0's), so that what derives from them can live in uniform registers.
  const int warp = __shfl_sync(~0u, tid / 32, 0), lane = tid % 32, wg = warp / 4;
  struct Item {
    int m_first, bh, b, h;
  };
  auto item_at = [&](int i) {
    const BlockOrder order = grouped_block_order(i, pairs, BH, heads_per_group);
    Item it;
    it.m_first = (pairs - 1 - order.rank) * kTiles, it.bh = order.bh, it.b = it.bh / p.H, it.h = it.bh % p.H;
    return it;
  };
  auto sees = [&](const Item& it, int mt, int n) {  // whether query tile mt has a (non-empty, so stored) tile at key block n
    return mt < m_blocks && attention_tile_kind<false>(p, it.b, mt * BM, min(mt * BM + BM, T), n * BN,
                                                       min(n * BN + BN, T)) != kTileEmpty;
  };
  auto next_block = [&](const Item& it, int n) {  // the first key block >= n that either tile of the pair sees
    for (; n < n_blocks; ++n)
      if (sees(it, it.m_first, n) || sees(it, it.m_first + 1, n)) break;
    return n;
  };
  auto load = [&](int s, const Item& it, int n) {  // thread 0
    bool seen[kTiles];
    int bytes = Kt::kKBytes;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      seen[t] = sees(it, it.m_first + t, n);
      bytes += seen[t] ? kDsTileBytes : 0;
    }
    mbarrier_arrive_expect_tx(&full[s], bytes);
    const uint8_t* ds_base = reinterpret_cast<const uint8_t*>(p.dq_accum);
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
      if (seen[t])
        bulk_load(stage_ds(s, t), ds_base + ds_tile_offset(it.bh, it.m_first + t, n, T, p.causal), kDsTileBytes,
                  &full[s]);
    const int hk = attention_kv_head(p, it.h);
#pragma unroll
    for (int pn = 0; pn < Kt::kPanels; ++pn)
      tma_load_4d(stage_k(s) + pn * BN * 128, &maps.k, &full[s], 64 * pn, n * BN, hk, it.b);
  };

  // Thread 0's loader walks the CTA's (item, block) sequence -- the consumers' below -- kStages blocks
  // ahead of them: (load_item, ln) is the next block to load; load_item >= n_items once none is left.
  int load_item = static_cast<int>(blockIdx.x), ln = 0;
  Item li{};
  auto settle = [&] {  // past the items whose pairs see no block
    while (ln >= n_blocks) {
      load_item += static_cast<int>(gridDim.x);
      if (load_item >= n_items) return;
      li = item_at(load_item);
      ln = next_block(li, 0);
    }
  };
  if (tid == 0) {
    tma_prefetch_map(&maps.k);
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
    fence_mbarrier_init();
    if (load_item < n_items) {
      li = item_at(load_item);
      ln = next_block(li, 0);
      settle();
    }
    for (int s = 0; s < kStages && load_item < n_items; ++s) {
      load(s, li, ln);
      ln = next_block(li, ln + 1);
      settle();
    }
  }
  __syncthreads();

  uint8_t* sOut = smem + Kt::kOffOut + wg * Kt::kOutBytes;  // this warpgroup's dQ staging
  auto at = [&](int r, int col) { return reinterpret_cast<uint16_t*>(sOut + sw128_panel_offset<BM, D>(r, col)); };
  const int warp_in_wg = warp % 4;
  float acc[D / 8][4];
  int j = 0;  // blocks consumed, over the CTA's items
  for (int item = static_cast<int>(blockIdx.x); item < n_items; item += static_cast<int>(gridDim.x)) {
    const Item it = item_at(item);
    const int m = it.m_first + wg;  // this warpgroup's tile (m >= m_blocks: none)
    zero_fragments(acc);
    for (int n = next_block(it, 0); n < n_blocks; n = next_block(it, n + 1), ++j) {
      const int s = j % kStages;
      mbarrier_wait(&full[s], (j / kStages) & 1, "full (ds dq), block", n);
      if (sees(it, m, n)) {  // uniform in the warpgroup
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
      // Both warpgroups' products have read stage s before thread 0 refills it (with the next block of
      // this pair or of the CTA's next one).
      named_barrier_sync(1, Kt::kNThreads);
      if (tid == 0 && load_item < n_items) {
        load(s, li, ln);
        ln = next_block(li, ln + 1);
        settle();
      }
    }
    if (m < m_blocks) {
      // dQ * softmax_scale through the staging buffer, each warp its own 16 rows, then 16-byte stores
      // of rows < T (a row with no tile stores zeros).
      stage_rows<kBF16, D>(acc, p.softmax_scale, 16 * warp_in_wg, at, lane);
      __syncwarp();
      uint16_t* dq = static_cast<uint16_t*>(p.dq) + it.b * p.dq_batch_stride + it.h * p.dq_head_stride;
      store_staged_rows<16, D>(dq, p.dq_row_stride, 16 * warp_in_wg, m * BM, T, at, lane);
      __syncwarp();  // every lane's reads of the rows before the next pair's writes
    }
  }
#else
  __trap();  // built without sm_90a: the launcher never picks this kernel there
#endif
}

}  // namespace ft::cuda::flash
