// Flash attention forward with FlashAttention-3's structure (sm_90a, D = 64 and 128): warp
// specialisation, TMA loads into an mbarrier-guarded K/V ring, both products on wgmma.
//
// Why a new kernel: the shipped wgmma forward (flash_fwd_wgmma_kernel.cuh) loads K and V with
// cp.async from every thread and meets at a __syncthreads per key tile, so its warpgroups issue
// their own loads and wait for each other; here one producer thread streams the tiles with TMA
// while two consumer warpgroups only compute, each at its own pace (the backward's structure,
// flash_bwd_ws_kernel.cuh, which is the model for the barriers below).
//
// One CTA = kBlockM = 64 x kConsumers query rows [m0, m0 + kBlockM) of one (batch, head), 1 + kConsumers
// warpgroups (kConsumers = 2 below; 3 is FlashAttention-3's 192-row tile at hdim 64):
//   warpgroup 0, the producer (setmaxnreg down to kProducerRegs): warp 0's lane 0 loads Q once
//     (TMA, one box per 64-column panel; q_full), then for each key tile the mask leaves non-empty
//     (QueryBlock::next_key_tile: the shipped forward's order) its K and V into a kStages ring:
//     k_full[s] / v_full[s] complete when the stage's K / V has landed (separately, so S = Q K^T
//     starts before V is in); k_empty[s] / v_empty[s] when every consumer thread is done with the
//     stage's K (its S = Q K^T completed) / V (its O += P V completed). Separate releases, because
//     with the intra-warpgroup overlap a stage's V is read one tile later than its K: with one
//     barrier for both, the producer could refill a stage only after the tile's O += P V, and with 2
//     stages the next K then arrived only after the consumers asked for it (variant 47 in session
//     17: slower than the plain form at every shape). The other 127 threads exit.
//   warpgroups 1 and 2, the consumers c = 0, 1 (setmaxnreg up to kConsumerRegs): rows
//     m0 + 64 c .. + 63; per key tile, on wgmma:
//       S  = Q_c K^T   m64 n kBlockN k16, A = Q_c rows, B = K rows (both shared memory, K-major;
//                      D = 128: eight k steps over two 64-column panels)
//       masked (partial tiles only), online softmax in registers (running max m and sum l, exp2
//       with the scale folded in log2 units: the shipped forward's arithmetic, row for row)
//       O += P V       m64 n64 k16, A = P from the accumulators, B = V read transposed (one n64
//                      product per 64-column panel of V)
//     K released (k_empty) once S has completed, V (v_empty) once O += P V has.
//   Epilogue as the shipped forward: O / l in the input dtype through this consumer's own rows of
//   sQ and 16-byte stores, lse = m * scale + ln(l) (natural-log units, what the backward reads;
//   -inf, and O = 0, for a row that sees no key), rows past T not written.
// Tiles: kBlockN = 128 keys at both head dims. Registers of a consumer thread at D = 128: O 64, S 64,
// P's A fragments 32 (S's registers are dead once P is packed, so the peak is about O + S + P =
// 160 of kConsumerRegs = 240); FlashAttention-3 also takes 128 x 128 for its hdim-128 causal
// forward. Shared memory: Q 32 KiB + kStages x (K + V) 64 KiB = 160 KiB at D = 128 with 2 stages,
// 224 KiB with 3 (what fits); 80 / 112 KiB at D = 64.
// Not covered (the launcher sends these calls to the other kernels: flash_fwd_ws_applies): dropout,
// the document mask, D = 256, strides TMA cannot describe, GPUs other than sm_90a (and builds or
// tests that disallow wgmma). Options (FlashFwdWsForm; flash_fwd_ws_form picks the dispatch's, the
// benchmark's variants 46-58 the others): kOverlap, FlashAttention-3's intra-warpgroup overlap (the
// next tile's S = Q K^T in flight with this tile's O += P V, the softmax under the latter); kPingPong,
// its inter-warpgroup ping-pong (the consumers take turns, on named barriers, to issue their
// products); kStages; kConsumers. The dispatch takes overlap + ping-pong at D = 128 from T = 1024,
// 3 consumers with the overlap at D = 64 from T = 16384 (session 17; from T = 4096 since session 31,
// T = 2048 since session 32), each persistent causal up to T = 8192 and non-causal up to 4096 (session
// 32; kPersistent below).
// Not done: causal tiles walked masked-first. No fence.proxy.async is needed: nothing
// the tensor cores or TMA read is written through the generic proxy (P stays in registers), and O's
// staging overwrites Q only after the wgmmas that read it were waited for (as the shipped forward).
// Written without a GPU in session 16; its first GPU run (session 17) passed every test, and the
// forms were measured then (bench/attention/NOTES.md). No form spills (168 registers a thread with
// 2 consumers, 128 with 3).
#pragma once

#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"
#include "ops/cuda/attention/flash_tma.cuh"
#include "ops/cuda/attention/flash_tma_map.h"
#include "ops/cuda/attention/flash_wgmma.cuh"

namespace ft::cuda::flash {

// kHeadDim 64 or 128: rows of one or two 64-column panels (flash_wgmma.cuh); a tile of R rows keeps
// panel p at p * R * 128 bytes.
// kOverlap: FlashAttention-3's intra-warpgroup overlap (the next tile's S = Q K^T and this tile's
// O += P V in flight together, the softmax under the latter); otherwise every product is waited for
// before the code that needs it.
// kPingPong: FlashAttention-3's inter-warpgroup ping-pong: the consumers take turns to issue their
// products (named barriers kTurnBarrier + c), so one's softmax runs under the other's wgmmas.
// kStages: the K / V ring's depth, 2 or 3 (3 fills 224 of 227 KiB at D = 128).
// kConsumers: consumer warpgroups of 64 rows, 2 or 3 (FlashAttention-3's 192-row tile at hdim 64:
// each K / V tile loaded serves 1.5x the rows; D = 64 only, without the ping-pong).
// kPersistent: one CTA per SM walks query blocks, taking the next from a global counter once it has
// issued the last one's loads (FlashAttention-3's dynamic persistent scheduler: a CTA that drew
// short blocks takes more), with two Q buffers: the producer loads the next block's Q (and its first
// K / V tiles) while the consumers still work on this one, and their epilogue (O's stores) runs
// while the next block's loads land. Without it, one CTA per block: at T = 1024 (8 blocks of 128
// rows a head, 4.5 key tiles each on average) a CTA's Q load and its first K wait, and its
// epilogue, are not hidden by anything, since only one CTA fits on an SM.
template <int kHeadDim_, bool kOverlap_ = false, bool kPingPong_ = false, int kStages_ = 2, int kConsumers_ = 2,
          bool kPersistent_ = false>
struct FlashFwdWsTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kOverlap = kOverlap_;
  static constexpr bool kPingPong = kPingPong_;
  static constexpr bool kPersistent = kPersistent_;
  static constexpr int kQBuffers = kPersistent ? 2 : 1;
  static constexpr int kConsumers = kConsumers_;
  static constexpr int kConsumerThreads = 128 * kConsumers;
  // Named barriers: 1 + c for a consumer's own 128 threads (the epilogue), kTurnBarrier + c for
  // consumer c's turn (256 threads: its own and the other consumer's arrivals).
  static constexpr int kTurnBarrier = 1 + kConsumers;
  static constexpr int kPanels = kHeadDim / 64;
  static constexpr int kBlockM = 64 * kConsumers;  // query rows per CTA, 64 per consumer
  static constexpr int kBlockN = 128;  // keys per tile (see the top of the file)
  static constexpr int kStages = kStages_;  // K / V ring
  static constexpr int kNThreads = 128 + kConsumerThreads;
  // Register split, FlashAttention-3's (what the CTA is given: 2 consumers 384 x 168, 3 consumers
  // 512 x 128): the producer only walks the tiles and issues TMA, so it keeps 24 (32 with 3
  // consumers, which makes the split add up to the 64 Ki registers exactly).
  static constexpr int kProducerRegs = kConsumers == 2 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? 240 : 160;
  static_assert(kConsumers == 2 || kConsumers == 3, "consumer warpgroups");
  static_assert(kConsumers == 2 || (kHeadDim == 64 && !kPingPong), "3 consumers: D = 64, no ping-pong");
  static_assert(128 * kProducerRegs + kConsumerThreads * kConsumerRegs == kNThreads * (65536 / kNThreads / 8 * 8),
                "the registers of one CTA per SM, split exactly (check_register_split)");
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;     // Q of the CTA (O staged there at the end)
  static constexpr int kTileBytes = kBlockN * kHeadDim * 2;  // one stage of K (or V)
  // Panel strides in descriptor units (16 bytes): Q's, a K / V tile's.
  static constexpr uint32_t kQPanelUnits = kBlockM * 128 / 16, kKvPanelUnits = kBlockN * 128 / 16;
  // Offsets (bytes) from the 1024-byte-aligned base; swizzled tiles first (1024-byte multiples).
  static constexpr int kOffQ = 0, kOffK = kQBuffers * kQBytes, kOffV = kOffK + kStages * kTileBytes,
                       kOffBars = kOffV + kStages * kTileBytes;
  // q_full, q_empty [kQBuffers] each, then k_full, v_full, k_empty, v_empty [kStages] each.
  static constexpr int kNumBars = 2 * kQBuffers + 4 * kStages;
  // kPersistent: the block each Q buffer holds, written by the producer before its q_full arrival.
  static constexpr int kOffBlockSlots = kOffBars + kNumBars * 8;
  static constexpr int kSmemBytes = 1024 /* alignment */ + kOffBlockSlots + kQBuffers * 4;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "warp-specialised forward head dim");
  static_assert(kStages == 2 || kStages == 3, "K / V ring depth");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "S = Q K^T: one wgmma N");
};

template <class Kt, bool kBF16>
__global__ void __launch_bounds__(Kt::kNThreads, 1)
    flash_fwd_ws_kernel(const __grid_constant__ FlashFwdTmaMaps maps, const AttentionParams p, int heads_per_group,
                        int* block_counter) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, kStages = Kt::kStages, kPanels = Kt::kPanels;
  constexpr int kQBuffers = Kt::kQBuffers;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);  // swizzled tiles: 1 KiB aligned
  uint8_t* sQ0 = smem + Kt::kOffQ;  // kQBuffers x BM x D (a block's O staged in its Q buffer at the end)
  uint8_t* sK = smem + Kt::kOffK;   // kStages x BN x D
  uint8_t* sV = smem + Kt::kOffV;   // kStages x BN x D
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + Kt::kOffBars);
  uint64_t* q_full = bars;                  // [kQBuffers]
  uint64_t* q_empty = q_full + kQBuffers;   // [kQBuffers] (kPersistent only)
  uint64_t* k_full = q_empty + kQBuffers;   // [kStages]
  uint64_t* v_full = k_full + kStages;      // [kStages]
  uint64_t* k_empty = v_full + kStages;     // [kStages]
  uint64_t* v_empty = k_empty + kStages;    // [kStages]
  int* block_slot = reinterpret_cast<int*>(smem + Kt::kOffBlockSlots);  // [kQBuffers] (kPersistent only)

  // The warp (and so warpgroup) index warp-uniform: the consumers' wgmma descriptors derive from it.
  const int tid = threadIdx.x, lane = tid % 32, warp = warp_index_uniform(), wg = warp / 4;
  const int T = p.T;
  // The query blocks this CTA works on, positions `linear` of grouped_block_order: its own (one CTA
  // per block), or with kPersistent blockIdx.x first and then gridDim.x + the next value of
  // *block_counter (zeroed by the launcher), until past the last block. The producer takes each
  // block once it has issued the previous block's loads (a CTA that drew short blocks comes back
  // sooner: greedy, as the hardware's own block scheduler is) and writes it into the Q buffer's
  // block_slot before that buffer's q_full arrival, past-the-end included, which tells the consumers
  // to stop. The launcher's heads_per_group keeps the CTAs in flight on a few heads, so that their
  // K and V stay in L2. (Session 27's static snake over every head's longest blocks first balanced as
  // well, but with every head in flight it read K and V from DRAM: bench_fp8's non-causal D = 128
  // forward at T = 4096 took 1.021 ms with it, 0.955 and 0.944 with the counter, session 32.) The
  // K / V ring's tile count `it` runs on across blocks.
  const int n_blocks_total = (T + BM - 1) / BM * p.B * p.H;
  using Block = QueryBlock<BM, BN, false>;  // kDocMask false: flash_fwd_ws_applies

  if (tid == 0) {
    for (int qb = 0; qb < kQBuffers; ++qb) {
      mbarrier_init(&q_full[qb], 1);                       // the producer's arrival with the TMA bytes
      mbarrier_init(&q_empty[qb], Kt::kConsumerThreads);  // every consumer thread, after its O stores
    }
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&k_full[s], 1);
      mbarrier_init(&v_full[s], 1);
      mbarrier_init(&k_empty[s], Kt::kConsumerThreads);  // every consumer thread
      mbarrier_init(&v_empty[s], Kt::kConsumerThreads);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles only meet at mbarriers

  if (wg == 0) {
    setmaxnreg_dec<Kt::kProducerRegs>();
    if (warp == 0 && lane == 0) {
      tma_prefetch_map(&maps.q);
      tma_prefetch_map(&maps.k);
      tma_prefetch_map(&maps.v);
      int it = 0;
      for (int local = 0, linear = static_cast<int>(blockIdx.x);; ++local) {
        const int qb = local % kQBuffers;
        uint8_t* sQ = sQ0 + qb * Kt::kQBytes;
        if constexpr (Kt::kPersistent) {
          // The consumers are done with the buffer's previous block (its O stored from it).
          mbarrier_wait(&q_empty[qb], ((local / kQBuffers) & 1) ^ 1, "q_empty (producer), block", linear);
          block_slot[qb] = linear;
          if (linear >= n_blocks_total) {
            mbarrier_arrive(&q_full[qb]);  // no bytes: the consumers read the end and stop
            break;
          }
        }
        const Block blk(p, heads_per_group, linear);
        // Q: rows past T land as zeros (and are never stored); the box's full bytes complete.
        mbarrier_arrive_expect_tx(&q_full[qb], Kt::kQBytes);
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn)
          tma_load_4d(sQ + pn * BM * 128, &maps.q, &q_full[qb], 64 * pn, blk.m0, blk.h, blk.b);
        const int hk = attention_kv_head(p, blk.h);
        for (int n = blk.next_key_tile(p, blk.n_begin); n < blk.n_end; n = blk.next_key_tile(p, n + 1), ++it) {
          const int s = it % kStages;
          const uint32_t empty_parity = ((it / kStages) & 1) ^ 1;  // a fresh barrier passes parity 1
          uint8_t* k_dst = sK + s * Kt::kTileBytes;
          uint8_t* v_dst = sV + s * Kt::kTileBytes;
          // Every consumer thread is done with tile it - kStages's K, then with its V.
          mbarrier_wait(&k_empty[s], empty_parity, "k_empty (producer), tile", n);
          mbarrier_arrive_expect_tx(&k_full[s], Kt::kTileBytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn)
            tma_load_4d(k_dst + pn * BN * 128, &maps.k, &k_full[s], 64 * pn, n * BN, hk, blk.b);
          mbarrier_wait(&v_empty[s], empty_parity, "v_empty (producer), tile", n);
          mbarrier_arrive_expect_tx(&v_full[s], Kt::kTileBytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn)
            tma_load_4d(v_dst + pn * BN * 128, &maps.v, &v_full[s], 64 * pn, n * BN, hk, blk.b);
        }
        if constexpr (!Kt::kPersistent) break;
        linear = static_cast<int>(gridDim.x) + atomicAdd(block_counter, 1);
      }
    }
    return;
  }

  // Consumers.
  setmaxnreg_inc<Kt::kConsumerRegs>();
  const int c = wg - 1;                   // query rows m0 + 64 c .. + 63
  const int wq = warp % 4;                // this warp's 16 of them (accumulator rows)
  const int row0 = 64 * c + 16 * wq;      // the warp's first row, local to the CTA
  const float scale_log2 = p.softmax_scale * kLog2e;
  // Descriptor low words (flash_wgmma.cuh; 16-byte units). K-major operands step 32 bytes (2 units)
  // per k step inside a panel and a panel every 4 steps; V, read transposed, 16 rows (128 units) per
  // k step, its N panels kKvPanelUnits apart.
  const uint32_t k_desc = wgmma_desc_sw128_lo(smem_u32(sK));
  const uint32_t v_desc = wgmma_desc_sw128_lo(smem_u32(sV));
  constexpr uint32_t kTileUnits = Kt::kTileBytes / 16;

  int it = 0;
  for (int local = 0;; ++local) {
    const int qb = local % kQBuffers;
    mbarrier_wait<false>(&q_full[qb], (local / kQBuffers) & 1, "q_full (consumer)", c);
    const int linear = Kt::kPersistent ? block_slot[qb] : static_cast<int>(blockIdx.x);
    if (linear >= n_blocks_total) break;  // kPersistent: no block left
    const Block blk(p, heads_per_group, linear);
    const int b = blk.b, m0 = blk.m0, m1 = blk.m1, n_end = blk.n_end;
    uint8_t* sQ = sQ0 + qb * Kt::kQBytes;
    const uint32_t q_desc = wgmma_desc_sw128_lo(smem_u32(sQ + 64 * c * 128));

    float acc_o[D / 8][4];
    zero_fragments(acc_o);
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

    // S = Q_c K^T from stage s (one commit group; the first k step overwrites the accumulator:
    // scale-d 0).
    auto issue_s = [&](float(&acc_s)[BN / 8][4], int s) {
      const uint32_t stage = s * kTileUnits;
      wgmma_fence();
      wgmma_ss_kmajor<BN, kBF16, D / 16>(acc_s, q_desc, Kt::kQPanelUnits, k_desc + stage, Kt::kKvPanelUnits);
      wgmma_commit();
    };
    // O += P V from stage s (one commit group), P as A fragments (16 keys a k step), V's k step kk =
    // its rows 16 kk .. 16 kk + 15, one n64 product per 64-column panel of O.
    auto issue_pv = [&](uint32_t(&pf)[BN / 16][4], int s) {
      const uint32_t stage = s * kTileUnits;
      reg_fence(pf);
      reg_fence(acc_o);
      wgmma_rs_transposed_b<BN / 16, kPanels, kBF16>(acc_o, pf, v_desc + stage, Kt::kKvPanelUnits);
    };
    // Masks tile n's scores (partial tiles only) and turns them into P in place: the online softmax of
    // flash_fwd_wgmma_kernel.cuh (without its lazy rescale), except that O's rescale factor is
    // returned in alpha rather than applied (an O += P V may still be accumulating into O).
    auto softmax = [&](float(&acc_s)[BN / 8][4], int n, float(&alpha)[2]) {
      const int n0 = n * BN, n1 = min(n0 + BN, T);
      // The tile kind over the CTA's rows, as the shipped two-warpgroup forward (conservative for a
      // consumer's half: only speed depends on it).
      if (attention_tile_kind<false>(p, b, m0, m1, n0, n1) != kTileFull || n0 + BN > T)
        mask_slab_scores<false>(acc_s, p, b, m0 + row0, n0, T, lane);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float mx = quad_row_max(acc_s, half, row_max[half]);
        const float m_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;  // all masked so far
        alpha[half] = fast_exp2(row_max[half] * scale_log2 - m_scaled);
        row_max[half] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
          for (int e = 2 * half; e < 2 * half + 2; ++e) {
            const float pe = fast_exp2(fmaf(acc_s[nb][e], scale_log2, -m_scaled));
            acc_s[nb][e] = pe;
            sum += pe;
          }
        row_sum[half] = row_sum[half] * alpha[half] + sum;
      }
    };
    auto rescale_o = [&](const float(&alpha)[2]) {
#pragma unroll
      for (int dj = 0; dj < D / 8; ++dj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[dj][e] *= alpha[e >> 1];
    };
    auto to_a = [&](uint32_t(&pf)[BN / 16][4], const float(&acc_s)[BN / 8][4]) {
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) acc_to_a<kBF16>(pf[kk], acc_s[2 * kk], acc_s[2 * kk + 1]);
    };
    // Stage s's K / V has been read for the last time by this thread's warp (its S / O += P V waited
    // for); the producer refills it once every consumer thread has said so.
    auto release_k = [&](int s) { mbarrier_arrive(&k_empty[s]); };
    auto release_v = [&](int s) { mbarrier_arrive(&v_empty[s]); };

    // kPingPong: consumer c issues a tile's products only in its turn (take_turn: barrier
    // kTurnBarrier + c completes with its own 128 threads and the other consumer's 128 arrivals), and
    // passes the turn on once they are issued (pass_turn). Both consumers walk the same tiles, so each
    // barrier sees one sync and one arrival per tile; consumer 1 hands consumer 0 its first turn
    // before a block's first tile and skips the pass after its last, so no arrival is left unmatched at
    // the end of a block (the next block starts the same way).
    auto take_turn = [&] {
      if constexpr (Kt::kPingPong) named_barrier_sync(Kt::kTurnBarrier + c, 256);
    };
    auto pass_turn = [&](int n_next) {
      if constexpr (Kt::kPingPong)
        if (c == 0 || n_next < n_end) named_barrier_arrive(Kt::kTurnBarrier + (c ^ 1), 256);
    };
    const int n_first = blk.next_key_tile(p, blk.n_begin);
    if (Kt::kPingPong && c == 1 && n_first < n_end) named_barrier_arrive(Kt::kTurnBarrier, 256);

    if constexpr (!Kt::kOverlap) {
      // Every product waited for before the code that needs it.
      for (int n = n_first, n_next; n < n_end; n = n_next, ++it) {
        n_next = blk.next_key_tile(p, n + 1);
        const int s = it % kStages;
        const uint32_t phase = (it / kStages) & 1;
        mbarrier_wait<false>(&k_full[s], phase, "k_full (consumer), tile", n);
        float acc_s[BN / 8][4];
        take_turn();
        issue_s(acc_s, s);
        pass_turn(n_next);
        wgmma_wait<0>();
        reg_fence(acc_s);
        release_k(s);
        float alpha[2];
        softmax(acc_s, n, alpha);
        rescale_o(alpha);
        uint32_t pf[BN / 16][4];
        to_a(pf, acc_s);
        mbarrier_wait<false>(&v_full[s], phase, "v_full (consumer), tile", n);
        issue_pv(pf, s);
        wgmma_wait<0>();
        reg_fence(acc_o);
        release_v(s);
      }
    } else {
      // FlashAttention-3's intra-warpgroup overlap: tile n's S = Q K^T and tile n - 1's O += P V are
      // in flight together, and tile n's softmax runs under the latter. O's rescale by tile n's
      // alpha waits for that O += P V, and P's A fragments are rebuilt only then (the wgmma still
      // reads the previous ones). The first tile is peeled off (no O += P V before it), the last
      // O += P V comes after the loop.
      int n = n_first;
      if (n < n_end) {
        uint32_t pf[BN / 16][4];
        int prev = it % kStages, prev_it = it, prev_n = n;  // the stage, ring count and tile whose P is in pf
        int n_next = blk.next_key_tile(p, n + 1);
        {
          mbarrier_wait<false>(&k_full[prev], (it / kStages) & 1, "k_full (consumer), tile", n);
          float acc_s[BN / 8][4];
          take_turn();
          issue_s(acc_s, prev);
          pass_turn(n_next);
          wgmma_wait<0>();
          reg_fence(acc_s);
          release_k(prev);
          float alpha[2];
          softmax(acc_s, n, alpha);  // O is still 0: no rescale
          to_a(pf, acc_s);
        }
        for (n = n_next, ++it; n < n_end; n = n_next, ++it) {
          n_next = blk.next_key_tile(p, n + 1);
          const int s = it % kStages;
          mbarrier_wait<false>(&k_full[s], (it / kStages) & 1, "k_full (consumer), tile", n);
          // V of the previous tile was loaded before K of this one: wait for both before the turn.
          mbarrier_wait<false>(&v_full[prev], (prev_it / kStages) & 1, "v_full (consumer), tile", prev_n);
          float acc_s[BN / 8][4];
          take_turn();
          issue_s(acc_s, s);
          issue_pv(pf, prev);
          pass_turn(n_next);
          wgmma_wait<1>();  // S (O += P V may still run)
          reg_fence(acc_s);
          release_k(s);
          float alpha[2];
          softmax(acc_s, n, alpha);
          wgmma_wait<0>();  // O += P V of the previous tile
          reg_fence(acc_o);
          reg_fence(pf);
          release_v(prev);
          rescale_o(alpha);
          to_a(pf, acc_s);
          prev = s, prev_it = it, prev_n = n;
        }
        mbarrier_wait<false>(&v_full[prev], (prev_it / kStages) & 1, "v_full (consumer), tile", prev_n);
        issue_pv(pf, prev);
        wgmma_wait<0>();
        reg_fence(acc_o);
        release_v(prev);
      }
    }

    // Epilogue, as flash_fwd_wgmma_kernel.cuh: O /= l, lse = m * scale + ln(l) (-inf: no key seen).
    float* lse = p.lse + static_cast<int64_t>(blk.bh) * T;
    normalize_rows<D>(acc_o, row_sum, 1.f);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float sum = row_sum[half];
      const int row = m0 + row0 + (lane >> 2) + 8 * half;
      if ((lane & 3) == 0 && row < T) lse[row] = sum > 0.f ? row_max[half] * p.softmax_scale + logf(sum) : -INFINITY;
    }
    // Stage O through this consumer's own rows of its Q buffer (its S products, the only readers of
    // those rows, were waited for by each warp; the warps meet before any of them overwrites a row
    // another warp's share of the wgmma read), then 16-byte stores.
    auto at = [&](int r, int col) { return reinterpret_cast<uint16_t*>(sQ + sw128_panel_offset<BM, D>(r, col)); };
    named_barrier_sync(1 + c, 128);
    stage_rows<kBF16, D>(acc_o, 1.f, row0, at, lane);
    __syncwarp();
    store_staged_rows<16, D>(blk.o, p.o_row_stride, row0, m0, T, at, lane);
    if constexpr (Kt::kPersistent) {
      // The buffer goes back to the producer, whose TMA (the async proxy) writes the block after next's
      // Q where this thread's generic stores and loads just were.
      fence_proxy_async_smem();
      mbarrier_arrive(&q_empty[qb]);
    } else {
      break;  // one block a CTA
    }
  }
#else
  __trap();  // built without sm_90a: the launcher never picks this kernel there
#endif
}

}  // namespace ft::cuda::flash
