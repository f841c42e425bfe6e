// Flash attention backward (FlashAttention-2 schedule, mma.sync tensor cores).
//
// One CTA per (block of kBlockN keys, batch * head); each warp owns kNTiles x 16 keys, so dK and dV
// of those keys accumulate in its registers for the whole pass, and every Q / dO fragment a warp
// reads from shared memory feeds kNTiles matrix products (shared-memory bandwidth, not the tensor
// cores, bounds this kernel: with kNTiles = 1 it reached 127 TFLOP/s on an H200 at T = 4096). The CTA loops over the query tiles that the
// mask leaves non-empty (causal: from the diagonal on), double-buffering Q, dO, lse and D with
// cp.async. Working with transposed scores keeps four of the five products in registers:
//   S^T  = K Q^T                       (A = K rows of this warp, B = Q from shared memory)
//   P^T  = exp(S^T * scale - lse)      (recomputed; lse per query column)
//   dP^T = V dO^T
//   dV  += (P o Z)^T dO                (A = P^T straight from the accumulators)
//   dS^T = P^T o (dP^T o Z - D)        (Z = keep * keep_scale, D = rowsum(dO o O))
//   dK  += dS^T Q                      (scaled by softmax_scale at the end)
//   dQ  += dS K                        (dS^T goes through shared memory; fp32 atomics into dq_accum)
// The dropout keep bits are regenerated from Philox for each tile (same function as the forward),
// in registers: a first version drew them into shared memory before the tile barrier, which kept
// the tensor cores idle meanwhile (dropout 0.1 then cost +27% of the backward on an H200).
// dQ uses atomicAdd, so by default its low bits depend on the order CTAs get there: not
// bit-reproducible. kOrderedDq (the deterministic backward with dropout) fixes the order: each
// warp's dQ sub-tile of query tile m has a counter in global memory; the CTA of key block n waits
// (lane 0 spinning) until the counter equals the number of non-empty key blocks above n, adds,
// then releases +1. So key blocks add in descending order, and the grid is launched in that order
// too (rank r of a head group = key block n_blocks - 1 - r): a CTA only ever waits for CTAs
// launched before it, so it cannot wait on one that never gets an SM (no deadlock), and under a
// causal mask block n + 1 starts two query tiles further on than block n, so it runs ahead.
// (Ascending order would make block n wait for block n - 1 to reach its first tile: a wavefront
// that keeps every CTA of a head resident until block 0 finishes.)
// kFixedDq (the deterministic backward's default) needs no order: dQ is added as 64-bit fixed-point
// integers (flash_dq_accum.cuh), whose sum is the same in any order, and the CTAs run as the atomic
// backward's do.
#pragma once

#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_dq_accum.cuh"
#include "ops/cuda/attention/flash_dq_order.cuh"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"

namespace ft::cuda::flash {

// kDocMask: the document mask (p.doc_start) is compiled in (attention_params.h: without it no
// document-mask code, for the registers).
template <class Kt, bool kBF16, bool kDropout, bool kOrderedDq, bool kDocMask, bool kFixedDq = false>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocksPerSm)
    flash_bwd_kernel(const AttentionParams p, int heads_per_group, int* dq_semaphore) {
  static_assert(!(kOrderedDq && kFixedDq), "one way of making dQ deterministic");
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, S = Kt::kSmemStride;
  constexpr int DS = Kt::kDsStride, NT = Kt::kNThreads;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint16_t* sK = reinterpret_cast<uint16_t*>(smem_raw);  // BN x S
  uint16_t* sV = sK + BN * S;                            // BN x S
  uint16_t* sQ = sV + BN * S;                            // 2 stages x BM x S
  uint16_t* sdO = sQ + 2 * BM * S;                       // 2 stages x BM x S
  uint16_t* sdS = sdO + 2 * BM * S;                      // BN x DS: dS^T of the current tile
  float* sLse = reinterpret_cast<float*>(sdS + BN * DS);  // 2 stages x BM
  float* sDsum = sLse + 2 * BM;                           // 2 stages x BM
  using DqLayout = DqAccumLayout<D>;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int T = p.T;
  // Causal: key block 0 sees every query tile, so rank = n_block runs longest first; the
  // deterministic order runs shortest first (see the top of this file).
  const KeyBlock<BM, BN, D, S, NT, kDocMask> blk(p, heads_per_group, kOrderedDq);
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: before any dropout_bits
  const int bh = blk.bh, b = blk.b, h = blk.h, n0 = blk.n0, n1 = blk.n1, m_blocks = blk.m_blocks;
  const int n_blocks = blk.n_blocks, n_block = blk.n_block;
  float* dq_accum = dq_head_floats<D>(p.dq_accum, bh, T);
  // The atomic backward (not kOrderedDq) keeps a pointer to this warp's dQ chunks of query tile 0
  // (flash_dq_accum.cuh): those of tile m are m * kDqTileChunks further, dj * 32 apart, so a tile's
  // adds cost one 64-bit multiply-add and take immediate offsets (from chunk() per add, the
  // addresses took about 25 instructions a tile; SASS, session 9). It also keeps the lse in log2
  // units in shared memory (below). The deterministic kernel does neither: with them it ran 2-3%
  // slower (H200, T = 2048-8192, p = 0.1; session 9). Nor does D = 128 (not measured; its dropout
  // kernel spilled 12 bytes more).
  constexpr bool kLeanTile = !kOrderedDq && D == 64;
  constexpr int kDqTileChunks = BM / 16 * DqLayout::kTilesD * 32;
  const int64_t dq_warp_chunk = DqLayout::chunk(warp % Kt::kWarpsM, warp / Kt::kWarpsM * (Kt::kDqCols / 8), lane);
  float4* const dq_warp = reinterpret_cast<float4*>(dq_accum + dq_warp_chunk);
  // kFixedDq: the same chunks as int64 words (tile m: m * kDqTileChunks * 4 words further, dj * 128).
  unsigned long long* const dq_fixed = dq_fixed_words<D>(p.dq_accum, bh, T);
  unsigned long long* const dq_fixed_warp = dq_fixed + DqLayout::fixed_word(dq_warp_chunk, lane);
  DqFixedAdder fixed_adder(n_blocks);
  auto next_tile = [&](int m) { return blk.next_query_tile(p, m); };
  auto load_q_tile = [&](int m, int stage) {
    blk.template load_query_tile<!kLeanTile>(p, m, sQ + stage * BM * S, sdO + stage * BM * S,
                                             sLse + stage * BM, sDsum + stage * BM, tid);
  };
  // kLeanTile: sLse holds the lse in log2 units, lse * log2 e (+inf where lse = -inf: the query sees
  // no key, so its P row is exp2(-inf) = 0). Warp 0 loads tile m's lse into registers (next_lse) while
  // tile m - 1 is computed and stores it converted at the end of that tile: converted where it is
  // used, it took three instructions per lse value and warp (FSETP, FMUL, FSEL), about 24 a tile
  // (SASS, session 9).
  constexpr int kLseRegs = (BM + 31) / 32;
  auto load_lse_rows = [&](int mm, float (&rows)[kLseRegs]) {
#pragma unroll
    for (int i = 0; i < kLseRegs; ++i) {
      const int r = mm * BM + lane + 32 * i;
      rows[i] = lane + 32 * i < BM && r < T ? blk.lse[r] : 0.f;
    }
  };
  auto store_lse_log2 = [&](const float (&rows)[kLseRegs], int stage) {
#pragma unroll
    for (int i = 0; i < kLseRegs; ++i)
      if (lane + 32 * i < BM) sLse[stage * BM + lane + 32 * i] = rows[i] == -INFINITY ? INFINITY : rows[i] * kLog2e;
  };

  blk.load_keys(p, sK, sV, tid);
  cp_async_commit();
  int m = next_tile(blk.m_begin);
  if (m < m_blocks) {
    load_q_tile(m, 0);
    if (kLeanTile && warp == 0) {
      float rows[kLseRegs];
      load_lse_rows(m, rows);
      store_lse_log2(rows, 0);
    }
  }
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  constexpr int NTL = Kt::kNTiles;
  const int key_row0 = warp * 16 * NTL;  // this warp's first local key
  // A fragments of this warp's K and V rows (re-read from shared memory when not kept).
  constexpr int kRegFrags = Kt::kKVInRegs ? D / 16 : 1;
  uint32_t kf[NTL][kRegFrags][4], vf[NTL][kRegFrags][4];
  if constexpr (Kt::kKVInRegs) {
#pragma unroll
    for (int ni = 0; ni < NTL; ++ni)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        load_a_frag<S>(kf[ni][kk], sK, key_row0 + ni * 16, kk, lane);
        load_a_frag<S>(vf[ni][kk], sV, key_row0 + ni * 16, kk, lane);
      }
  }

  float acc_dk[NTL][D / 8][4], acc_dv[NTL][D / 8][4];
  zero_fragments(acc_dk);
  zero_fragments(acc_dv);

  const float scale_log2 = p.softmax_scale * kLog2e;
  const float keep_scale = kDropout ? drop.keep_scale : 1.f;
  int stage = 0;
  // kOrderedDq: this warp's counter of tile m; a release not yet made (see the dQ phase).
  auto dq_sem = [&](int mm) {
    return dq_semaphore + (static_cast<int64_t>(bh) * m_blocks + mm) * Kt::kNWarps + warp;
  };
  int* pending_release = nullptr;
  const bool defer_release = kOrderedDq && p.causal;
  while (m < m_blocks) {
    const int mn = next_tile(m + 1);
    const int m0 = m * BM, m1 = min(m0 + BM, T);
    int peek = -1;  // kOrderedDq: the counter as seen at the start of the tile (lane 0)
    if constexpr (kOrderedDq) {
      if (lane == 0) peek = ld_relaxed_gpu(dq_sem(m));
    }
    cp_async_wait<0>();
    __syncthreads();
    float next_lse[kLseRegs];
    if (mn < m_blocks) {
      load_q_tile(mn, stage ^ 1);
      if (kLeanTile && warp == 0) load_lse_rows(mn, next_lse);
    }
    cp_async_commit();
    const uint16_t* sQs = sQ + stage * BM * S;
    const uint16_t* sdOs = sdO + stage * BM * S;
    const float* sLs = sLse + stage * BM;
    const float* sDs = sDsum + stage * BM;

    // Dropout keep bits of this warp's elements, drawn in registers (overlaps the products below):
    // keep[ni] bit 4 nb + e is accumulator element acc[ni][nb][e] (transposed_tile_keep_bits).
    uint32_t keep[NTL];
    if constexpr (kDropout) {
#pragma unroll
      for (int ni = 0; ni < NTL; ++ni)
        keep[ni] = transposed_tile_keep_bits<BM>(drop, bh, m0, n0 + key_row0 + 16 * ni, lane);
    }

    // S^T = K Q^T and dP^T = V dO^T: NTL x 16 keys x BM queries per warp.
    float acc_s[NTL][BM / 8][4], acc_dp[NTL][BM / 8][4];
    zero_fragments(acc_s);
    zero_fragments(acc_dp);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t ka[NTL][4], va[NTL][4];
#pragma unroll
      for (int ni = 0; ni < NTL; ++ni) {
        a_frag<Kt::kKVInRegs, S>(ka[ni], kf[ni], sK, key_row0 + ni * 16, kk, lane);
        a_frag<Kt::kKVInRegs, S>(va[ni], vf[ni], sV, key_row0 + ni * 16, kk, lane);
      }
#pragma unroll
      for (int nj = 0; nj < BM / 16; ++nj) {
        const int off = (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * S + kk * 16 + ((lane >> 3) & 1) * 8;
        uint32_t qb[4], db[4];
        ldmatrix_x4(qb, smem_u32(sQs + off));
        ldmatrix_x4(db, smem_u32(sdOs + off));
#pragma unroll
        for (int ni = 0; ni < NTL; ++ni) {
          mma_16816<kBF16>(acc_s[ni][2 * nj], ka[ni], qb[0], qb[1]);
          mma_16816<kBF16>(acc_s[ni][2 * nj + 1], ka[ni], qb[2], qb[3]);
          mma_16816<kBF16>(acc_dp[ni][2 * nj], va[ni], db[0], db[1]);
          mma_16816<kBF16>(acc_dp[ni][2 * nj + 1], va[ni], db[2], db[3]);
        }
      }
    }

    // kOrderedDq, causal: the previous tile's deferred release, made here in the middle of this tile
    // (after its S and dP products) rather than at its dQ phase, so the block below sees it about
    // half a tile earlier; and a second relaxed peek of this tile's counter, as late as possible
    // before the dQ phase needs it (T = 4096 / 16384, dropout 0.1: 4.03 / 15.3 ms against 4.11 /
    // 16.2 ms with both at the dQ phase; bench/attention/NOTES.md).
    if constexpr (kOrderedDq) {
      if (lane == 0) {
        if (pending_release != nullptr) red_release_gpu_add(pending_release, 1);
        if (dq_blocks_closed_form<kDocMask>(p) &&
            peek != dq_blocks_above<kDocMask>(p, b, m0, m1, n_block, n_blocks, BN, 0))
          peek = ld_relaxed_gpu(dq_sem(m));
      }
      pending_release = nullptr;
    }

    // Masked pairs get S = -inf (so P = 0) in a pass of their own, taken only by partial tiles.
    // Tested inside the loop below, the per-element branches cut it into basic blocks the compiler
    // cannot interleave (H200, T = 4096, p = 0.1: bwd 2.85 -> 2.70 ms; the deterministic kernels
    // gained 16-17%; bench/attention/NOTES.md, session 5).
    if (attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileFull || n0 + BN > T || m0 + BM > T) {
      mask_scores<kDocMask>(acc_s, p, b, [&](int ni, int nb, int e) {
        return make_int2(m0 + nb * 8 + 2 * (lane & 3) + (e & 1), n0 + key_row0 + ni * 16 + (lane >> 2) + 8 * (e >> 1));
      });
    }
    // P^T, then dS^T (into acc_dp) and P o Z for dV (into acc_s).
#pragma unroll
    for (int ni = 0; ni < NTL; ++ni) {
#pragma unroll
      for (int nb = 0; nb < BM / 8; ++nb) {
        const float2 l2 = *reinterpret_cast<const float2*>(sLs + nb * 8 + 2 * (lane & 3));
        const float2 dd = *reinterpret_cast<const float2*>(sDs + nb * 8 + 2 * (lane & 3));
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float lse_q = (e & 1) ? l2.y : l2.x;
          const float d_q = (e & 1) ? dd.y : dd.x;
          // lse = -inf: the query sees no key, so its P row is all zeros. exp2(-inf) = 0.
          const float lse_log2 = kLeanTile ? lse_q : lse_q == -INFINITY ? INFINITY : lse_q * kLog2e;
          const float pe = fast_exp2(fmaf(acc_s[ni][nb][e], scale_log2, -lse_log2));
          float z = keep_scale;
          if constexpr (kDropout) z = ((keep[ni] >> (4 * nb + e)) & 1u) ? keep_scale : 0.f;
          acc_dp[ni][nb][e] = pe * (acc_dp[ni][nb][e] * z - d_q);
          acc_s[ni][nb][e] = pe * z;
        }
      }
    }

    // dV += (P o Z)^T dO and dK += dS^T Q; B operands are dO and Q rows, transposed on load.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t ap[NTL][4], ad[NTL][4];
#pragma unroll
      for (int ni = 0; ni < NTL; ++ni) {
        acc_to_a<kBF16>(ap[ni], acc_s[ni][2 * kk], acc_s[ni][2 * kk + 1]);
        acc_to_a<kBF16>(ad[ni], acc_dp[ni][2 * kk], acc_dp[ni][2 * kk + 1]);
      }
#pragma unroll
      for (int dj = 0; dj < D / 16; ++dj) {
        const int off = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + dj * 16 + (lane >> 4) * 8;
        uint32_t ob[4], qb[4];
        ldmatrix_x4_trans(ob, smem_u32(sdOs + off));
        ldmatrix_x4_trans(qb, smem_u32(sQs + off));
#pragma unroll
        for (int ni = 0; ni < NTL; ++ni) {
          mma_16816<kBF16>(acc_dv[ni][2 * dj], ap[ni], ob[0], ob[1]);
          mma_16816<kBF16>(acc_dv[ni][2 * dj + 1], ap[ni], ob[2], ob[3]);
          mma_16816<kBF16>(acc_dk[ni][2 * dj], ad[ni], qb[0], qb[1]);
          mma_16816<kBF16>(acc_dk[ni][2 * dj + 1], ad[ni], qb[2], qb[3]);
        }
      }
    }

    // dS^T -> shared memory, then dQ(tile) = dS K, split over warps as kWarpsM x kWarpsD.
    if constexpr (Kt::kDiag != 2) {  // kDiag 2: no dQ phase (timing only)
#pragma unroll
      for (int ni = 0; ni < NTL; ++ni)
#pragma unroll
        for (int nb = 0; nb < BM / 8; ++nb)
#pragma unroll
          for (int half = 0; half < 2; ++half)
            *reinterpret_cast<uint32_t*>(sdS + (key_row0 + ni * 16 + (lane >> 2) + 8 * half) * DS +
                                         nb * 8 + 2 * (lane & 3)) =
                pack2<kBF16>(acc_dp[ni][nb][2 * half], acc_dp[ni][nb][2 * half + 1]);
      __syncthreads();
      {
        constexpr int kCols = Kt::kDqCols;
        const int wm = warp % Kt::kWarpsM, wd = warp / Kt::kWarpsM;
        float acc_dq[kCols / 8][4];
        zero_fragments(acc_dq);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          uint32_t a[4];
          ldmatrix_x4_trans(a, smem_u32(sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * DS +
                                        wm * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
          for (int dj = 0; dj < kCols / 16; ++dj) {
            uint32_t kb[4];
            ldmatrix_x4_trans(kb, smem_u32(sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) *
                                                    S + wd * kCols + dj * 16 + (lane >> 4) * 8));
            mma_16816<kBF16>(acc_dq[2 * dj], a, kb[0], kb[1]);
            mma_16816<kBF16>(acc_dq[2 * dj + 1], a, kb[2], kb[3]);
          }
        }
        // kOrderedDq: make the deferred release of the previous tile if not made yet, then wait until
        // every key block above this one has added into this tile. The peek taken at the start of the tile
        // usually shows that already (the blocks above run ahead), and then no acquire load sits
        // on the critical path. Formally a relaxed read of a released value orders nothing; what
        // orders our adds after theirs is that the releaser's adds were performed at L2 before its
        // counter changed, and ours are issued only after lane 0 has read the changed value and
        // the warp has synchronised (a control dependency; GPUs do not issue stores or reductions
        // speculatively). Measured
        // against the always-acquire form: 3.63 vs 3.99 ms at T = 4096 (bench/attention/NOTES.md);
        // FlashCuda.DeterministicBackwardIsBitIdentical checks the bits.
        int* sem = nullptr;
        if constexpr (kOrderedDq) {
          const int expected = dq_blocks_above<kDocMask>(p, b, m0, m1, n_block, n_blocks, BN, lane);
          sem = dq_sem(m);
          if (lane == 0) {
            if (pending_release != nullptr) red_release_gpu_add(pending_release, 1);
            if (peek != expected)
              while (ld_acquire_gpu(sem) != expected) {
              }
          }
          pending_release = nullptr;
          __syncwarp();
        }
        // This warp's chunks of the tile in dq_accum's layout (flash_dq_accum.cuh): one 16-byte
        // fp32 RED per lane and n8 tile, 512 contiguous bytes per warp (two 8-byte REDs per lane
        // into (T, D) rows before: bwd 2.64 -> 2.47 ms at T = 4096; bench/attention/NOTES.md).
        if (Kt::kDiag == 0 || T < 0) {  // kDiag 1: the products stay, the adds go
#pragma unroll
          for (int dj = 0; dj < kCols / 8; ++dj) {
            // Not kLeanTile: the chunk's float offset from the layout (the lean tile steps its pointers).
            const int64_t laid_chunk = kLeanTile ? 0 : DqLayout::chunk((m0 >> 4) + wm, wd * (kCols / 8) + dj, lane);
            if constexpr (kFixedDq) {
              unsigned long long* const word =
                  kLeanTile ? dq_fixed_warp + static_cast<int64_t>(m) * kDqTileChunks * 4 + dj * 128
                            : dq_fixed + DqLayout::fixed_word(laid_chunk, lane);
              fixed_adder.add4(word, acc_dq[dj][0], acc_dq[dj][1], acc_dq[dj][2], acc_dq[dj][3]);
            } else {
              float4* const chunk = kLeanTile ? dq_warp + static_cast<int64_t>(m) * kDqTileChunks + dj * 32
                                              : reinterpret_cast<float4*>(dq_accum + laid_chunk);
              atomicAdd(chunk, make_float4(acc_dq[dj][0], acc_dq[dj][1], acc_dq[dj][2], acc_dq[dj][3]));
            }
          }
        }
        if constexpr (kOrderedDq) {
          // Causal: release in the middle of the next tile (or after the loop), when these adds have
          // long completed, so the release's fence costs little; the block below starts two tiles
          // later and seldom waits for it. Dense: at once (every block waits on its neighbour).
          if (defer_release) {
            pending_release = sem;  // released in the middle of the next tile or after the loop
          } else {
            __syncwarp();
            if (lane == 0) red_release_gpu_add(sem, 1);
          }
        }
      }
    }
    // The next stage's lse: its last readers (the tile before this one) finished before this
    // tile's first barrier, and the next tile reads it after its own.
    if (kLeanTile && warp == 0 && mn < m_blocks) store_lse_log2(next_lse, stage ^ 1);
    m = mn;
    stage ^= 1;
  }
  if (pending_release != nullptr) {
    __syncwarp();
    if (lane == 0) red_release_gpu_add(pending_release, 1);
  }
  if constexpr (kFixedDq && Kt::kDiag == 0) fixed_adder.flag_overflow(dq_fixed_flag<D>(p.dq_accum, p.B * p.H, bh, T));
  cp_async_wait<0>();
  __syncthreads();  // every warp is done reading sK (dQ) before it is reused for the output

  // dK *= scale; stage dK, dV through this warp's rows of sK, sV; 16-byte stores.
  uint16_t* dk = static_cast<uint16_t*>(p.dk) + b * p.dk_batch_stride + h * p.dk_head_stride;
  uint16_t* dv = static_cast<uint16_t*>(p.dv) + b * p.dv_batch_stride + h * p.dv_head_stride;
#pragma unroll
  for (int ni = 0; ni < NTL; ++ni)
#pragma unroll
    for (int dj = 0; dj < D / 8; ++dj)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int off = (key_row0 + ni * 16 + (lane >> 2) + 8 * half) * S + dj * 8 + 2 * (lane & 3);
        *reinterpret_cast<uint32_t*>(sK + off) =
            pack2<kBF16>(acc_dk[ni][dj][2 * half] * p.softmax_scale,
                         acc_dk[ni][dj][2 * half + 1] * p.softmax_scale);
        *reinterpret_cast<uint32_t*>(sV + off) =
            pack2<kBF16>(acc_dv[ni][dj][2 * half], acc_dv[ni][dj][2 * half + 1]);
      }
  __syncwarp();
  constexpr int kChunksPerRow = D / 8;
#pragma unroll
  for (int i = lane; i < 16 * NTL * kChunksPerRow; i += 32) {
    const int r = key_row0 + i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    const int key = n0 + r;
    if (key < T) {
      *reinterpret_cast<uint4*>(dk + key * p.dk_row_stride + c) =
          *reinterpret_cast<const uint4*>(sK + r * S + c);
      *reinterpret_cast<uint4*>(dv + key * p.dv_row_stride + c) =
          *reinterpret_cast<const uint4*>(sV + r * S + c);
    }
  }
}

}  // namespace ft::cuda::flash
