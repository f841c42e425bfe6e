// Flash attention backward with wide warp tiles (mma.sync; FlashAttention-2's tiling at D = 64 and
// at D = 256, where it runs 64 x 64 tiles: flash_launch.cuh).
//
// One CTA of 8 warps per (block of kBlockN = 128 keys, batch * head), looping over 128-query tiles
// of Q, dO, lse and D (double-buffered with cp.async); dK and dV of the CTA's keys accumulate in
// registers. Unlike flash_bwd_kernel.cuh (4 warps x 16 keys, transposed scores kept in registers,
// every warp re-reading the whole Q / dO tile), every product here is split over the 8 warps in
// 32 x 32 or 32 x 64 warp tiles, so each fragment read from shared memory feeds 2-8 mma tiles; the
// price is that P and dS make a round trip through shared memory (the A operands of the products
// that need them transposed or split differently):
//   phase 1, warps 4 (queries) x 2 (keys), 32 x 64 each:  S = Q K^T, dP = dO V^T
//   phase 2, same layout, in registers:  P = exp(S scale - lse), dS = P o (dP o Z - D), P o Z;
//            P o Z and dS -> shared memory (bf16), then one barrier
//   phase 3, warps 4 (keys) x 2 (dims), 32 x 32 each:  dV += (P o Z)^T dO, dK += dS^T Q
//   phase 4, warps 4 (queries) x 2 (dims), 32 x 32 each: dQ(tile) = dS K, fp32 REDs into dq_accum
//            (one 16-byte RED per lane and 16 x 8 tile; flash_dq_accum.cuh)
// The next tile's barrier (after its loads land) orders phase 3 and 4's reads of sP / sdS before
// they are overwritten. Dropout keep bits come from the same accumulator-tile calls as the forward's
// (dropout_keep_bits_slab), since the scores are not transposed here. Masked pairs are set to
// S = -inf in a pass that only partial tiles take: with the mask tested per element inside phase 2
// this kernel ran 3.11 ms instead of 2.17 at T = 4096 (H200; the branches split phase 2 into basic
// blocks that cannot be interleaved). Nsight Compute put PyTorch's FlashAttention-2 backward, which
// has this tiling, at 0.76 instructions per (query, key) pair against 1.05 for the 4-warp kernel.
#pragma once

#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_dq_accum.cuh"
#include "ops/cuda/attention/flash_dq_order.cuh"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"

namespace ft::cuda::flash {

// kWithDq false: no phase 4 (the split deterministic backward's dK / dV kernel; its dQ comes from
// flash_bwd_dq_kernel.cuh).
template <int kHeadDim_, int kBlockM_ = 128, int kBlockN_ = 128, bool kWithDq_ = true>
struct FlashBwdWideTraits {
  static constexpr bool kWithDq = kWithDq_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = 8;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr int kSmemStride = kHeadDim + 8;  // K, V, Q, dO rows (ldmatrix conflict-free)
  static constexpr int kPStride = kBlockN + 8;      // P, dS rows (queries x keys)
  // Warp tiles: phase 1 / 2 kBlockM / 4 queries x kBlockN / 2 keys; phase 3 kBlockN / 4 keys x
  // kHeadDim / 2; phase 4 kBlockM / 4 queries x kHeadDim / 2.
  static constexpr int kMS = kBlockM / 4, kNS = kBlockN / 2, kNK = kBlockN / 4, kMQ = kBlockM / 4;
  static constexpr int kDW = kHeadDim / 2;
  // Phase 4 computes a warp's kDW columns of dQ in passes of kDqCols: at D = 256 a 16 x 128 fp32
  // accumulator beside dK and dV (128 registers) spilled 84-100 bytes, 16 x 64 spills none without
  // dropout and 64 bytes with it, 16 x 32 32 bytes in both (ptxas, sm_90a, CUDA 13.0).
  static constexpr int kDqCols = kDW < 64 ? kDW : 64;
  static constexpr int kSmemBytes = 2 * kBlockN * kSmemStride * 2      // K, V
                                    + 4 * kBlockM * kSmemStride * 2    // Q, dO x 2 stages
                                    + 2 * kBlockM * kPStride * 2       // P o Z, dS
                                    + 2 * 2 * kBlockM * 4;             // lse, D x 2 stages
  static_assert(kMS % 16 == 0 && kNS % 16 == 0 && kNK % 16 == 0 && kDW % 16 == 0 && kDW % kDqCols == 0,
                "16-wide mma tiles, whole dQ passes");
  static_assert(kNS / 8 % 2 == 0, "dropout_keep_bits_slab takes whole 16-column calls");
};

// The same wide tile without its dQ phase.
template <class Kt>
using FlashBwdWideNoDq = FlashBwdWideTraits<Kt::kHeadDim, Kt::kBlockM, Kt::kBlockN, false>;

// kOrderedDq (the deterministic backward with dropout): key blocks add into each warp's 16-row dQ
// slab in descending order, as in flash_bwd_kernel.cuh (its top comment says why that cannot
// deadlock); a warp's counter is the one of its 16 x kDW slab, four per 32 query rows (the layout
// of flash_attention_backward_workspace: 2 slabs x 2 column halves). Slabs past T add nothing.
// kDocMask: as flash_bwd_kernel's (no document-mask code without it, for the registers).
// kFixedDq: fixed-point dQ adds in any order (flash_dq_accum.cuh), the deterministic default.
template <class Kt, bool kBF16, bool kDropout, bool kOrderedDq, bool kDocMask, bool kFixedDq = false>
__global__ void __launch_bounds__(Kt::kNThreads, 1)
    flash_bwd_wide_kernel(const AttentionParams p, int heads_per_group, int* dq_semaphore) {
  static_assert(!(kOrderedDq && kFixedDq), "one way of making dQ deterministic");
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, S = Kt::kSmemStride;
  constexpr int PS = Kt::kPStride, NT = Kt::kNThreads;
  constexpr int MS = Kt::kMS, NS = Kt::kNS, NK = Kt::kNK, MQ = Kt::kMQ, DW = Kt::kDW, DQ = Kt::kDqCols;
  using DqLayout = DqAccumLayout<D>;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint16_t* sK = reinterpret_cast<uint16_t*>(smem_raw);  // BN x S
  uint16_t* sV = sK + BN * S;                            // BN x S
  uint16_t* sQ = sV + BN * S;                            // 2 stages x BM x S
  uint16_t* sdO = sQ + 2 * BM * S;                       // 2 stages x BM x S
  uint16_t* sP = sdO + 2 * BM * S;                       // BM x PS: P o Z (queries x keys)
  uint16_t* sdS = sP + BM * PS;                          // BM x PS: dS
  float* sLse = reinterpret_cast<float*>(sdS + BM * PS);  // 2 stages x BM
  float* sDsum = sLse + 2 * BM;                           // 2 stages x BM

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int T = p.T;
  // Causal: key block 0 sees every query tile, so it runs first (longest first); kOrderedDq runs the
  // blocks in the order they add into dQ (descending).
  const KeyBlock<BM, BN, D, S, NT, kDocMask> blk(p, heads_per_group, kOrderedDq);
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: before any dropout_bits
  const int bh = blk.bh, b = blk.b, h = blk.h, n0 = blk.n0, n1 = blk.n1, m_blocks = blk.m_blocks;
  float* dq_accum = dq_head_floats<D>(p.dq_accum, bh, T);
  unsigned long long* const dq_fixed = dq_fixed_words<D>(p.dq_accum, bh, T);
  DqFixedAdder fixed_adder(blk.n_blocks);
  auto load_q_tile = [&](int m, int stage) {
    blk.load_query_tile(p, m, sQ + stage * BM * S, sdO + stage * BM * S, sLse + stage * BM, sDsum + stage * BM, tid);
  };

  blk.load_keys(p, sK, sV, tid);
  cp_async_commit();
  int m = blk.next_query_tile(p, blk.m_begin);
  if (m < m_blocks) load_q_tile(m, 0);
  cp_async_commit();

  // Warp coordinates of the three layouts (all 4 x 2 over the warp index).
  const int w4 = warp >> 1, w2 = warp & 1;
  const int s_row0 = w4 * MS, s_col0 = w2 * NS;  // phases 1, 2: queries x keys
  const int k_row0 = w4 * NK;                    // phase 3: keys; columns w2 * DW
  const int q_row0 = w4 * MQ;                    // phase 4: queries; columns w2 * DW

  float acc_dk[NK / 16][DW / 8][4], acc_dv[NK / 16][DW / 8][4];
  zero_fragments(acc_dk);
  zero_fragments(acc_dv);

  const float scale_log2 = p.softmax_scale * kLog2e;
  const float keep_scale = kDropout ? drop.keep_scale : 1.f;
  int stage = 0;
  while (m < m_blocks) {
    const int mn = blk.next_query_tile(p, m + 1);
    const int m0 = m * BM, m1 = min(m0 + BM, T);
    cp_async_wait<0>();
    __syncthreads();  // this tile's Q / dO landed; last tile's phases 3, 4 are done with sP, sdS
    if (mn < m_blocks) load_q_tile(mn, stage ^ 1);
    cp_async_commit();
    const uint16_t* sQs = sQ + stage * BM * S;
    const uint16_t* sdOs = sdO + stage * BM * S;
    const float* sLs = sLse + stage * BM;
    const float* sDs = sDsum + stage * BM;

    // Phase 1: S = Q K^T and dP = dO V^T for this warp's MS queries x NS keys.
    float acc_s[MS / 16][NS / 8][4], acc_dp[MS / 16][NS / 8][4];
    zero_fragments(acc_s);
    zero_fragments(acc_dp);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MS / 16][4], da[MS / 16][4];
#pragma unroll
      for (int mi = 0; mi < MS / 16; ++mi) {
        const int off = (s_row0 + mi * 16 + (lane & 15)) * S + kk * 16 + (lane >> 4) * 8;
        ldmatrix_x4(qa[mi], smem_u32(sQs + off));
        ldmatrix_x4(da[mi], smem_u32(sdOs + off));
      }
#pragma unroll
      for (int nj = 0; nj < NS / 16; ++nj) {
        const int off = (s_col0 + nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * S + kk * 16 + ((lane >> 3) & 1) * 8;
        uint32_t kb[4], vb[4];
        ldmatrix_x4(kb, smem_u32(sK + off));
        ldmatrix_x4(vb, smem_u32(sV + off));
#pragma unroll
        for (int mi = 0; mi < MS / 16; ++mi) {
          mma_16816<kBF16>(acc_s[mi][2 * nj], qa[mi], kb[0], kb[1]);
          mma_16816<kBF16>(acc_s[mi][2 * nj + 1], qa[mi], kb[2], kb[3]);
          mma_16816<kBF16>(acc_dp[mi][2 * nj], da[mi], vb[0], vb[1]);
          mma_16816<kBF16>(acc_dp[mi][2 * nj + 1], da[mi], vb[2], vb[3]);
        }
      }
    }

    // Phase 2: P, dS, P o Z -> shared memory. Row (query) r of fragment (mi, half) is
    // s_row0 + 16 mi + lane / 4 + 8 half; column (key) of (nb, e) is s_col0 + 8 nb + 2 (lane % 4) + (e & 1).
    if (attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileFull || n0 + BN > T || m0 + BM > T) {
      mask_scores<kDocMask>(acc_s, p, b, [&](int mi, int nb, int e) {
        return make_int2(m0 + s_row0 + mi * 16 + (lane >> 2) + 8 * (e >> 1), n0 + s_col0 + nb * 8 + 2 * (lane & 3) + (e & 1));
      });
    }
#pragma unroll
    for (int mi = 0; mi < MS / 16; ++mi) {
      uint32_t keep_bits[2] = {0u, 0u};
      if constexpr (kDropout) dropout_keep_bits_slab<NS / 8>(drop, bh, m0 + s_row0 + mi * 16, n0 + s_col0, lane, keep_bits);
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int r = s_row0 + mi * 16 + (lane >> 2) + 8 * half;
        const float lse_q = sLs[r], d_q = sDs[r];
        // lse = -inf: the query sees no key, so its P row is all zeros. exp2(-inf) = 0.
        const float lse_log2 = lse_q == -INFINITY ? INFINITY : lse_q * kLog2e;
        const uint32_t keep = keep_bits[half];
#pragma unroll
        for (int nb = 0; nb < NS / 8; ++nb) {
          float pz[2], ds[2];
#pragma unroll
          for (int e2 = 0; e2 < 2; ++e2) {
            const int e = 2 * half + e2;
            const float pe = fast_exp2(fmaf(acc_s[mi][nb][e], scale_log2, -lse_log2));
            float z = keep_scale;
            if constexpr (kDropout) z = ((keep >> (2 * nb + e2)) & 1u) ? keep_scale : 0.f;
            ds[e2] = pe * (acc_dp[mi][nb][e] * z - d_q);
            pz[e2] = pe * z;
          }
          const int off = r * PS + s_col0 + nb * 8 + 2 * (lane & 3);
          *reinterpret_cast<uint32_t*>(sP + off) = pack2<kBF16>(pz[0], pz[1]);
          *reinterpret_cast<uint32_t*>(sdS + off) = pack2<kBF16>(ds[0], ds[1]);
        }
      }
    }
    __syncthreads();

    // Phase 3: dV += (P o Z)^T dO, dK += dS^T Q over the tile's BM queries. A = P^T / dS^T rows
    // (keys) read transposed from the queries x keys tiles; B = dO / Q rows read transposed.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t pa[NK / 16][4], sa[NK / 16][4];
#pragma unroll
      for (int mi = 0; mi < NK / 16; ++mi) {
        const int off = (kk * 16 + (lane & 7) + (lane >> 4) * 8) * PS + k_row0 + mi * 16 + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(pa[mi], smem_u32(sP + off));
        ldmatrix_x4_trans(sa[mi], smem_u32(sdS + off));
      }
#pragma unroll
      for (int dj = 0; dj < DW / 16; ++dj) {
        const int off = (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + w2 * DW + dj * 16 + (lane >> 4) * 8;
        uint32_t ob[4], qb[4];
        ldmatrix_x4_trans(ob, smem_u32(sdOs + off));
        ldmatrix_x4_trans(qb, smem_u32(sQs + off));
#pragma unroll
        for (int mi = 0; mi < NK / 16; ++mi) {
          mma_16816<kBF16>(acc_dv[mi][2 * dj], pa[mi], ob[0], ob[1]);
          mma_16816<kBF16>(acc_dv[mi][2 * dj + 1], pa[mi], ob[2], ob[3]);
          mma_16816<kBF16>(acc_dk[mi][2 * dj], sa[mi], qb[0], qb[1]);
          mma_16816<kBF16>(acc_dk[mi][2 * dj + 1], sa[mi], qb[2], qb[3]);
        }
      }
    }

    // Phase 4: dQ(tile) = dS K over the CTA's BN keys, then one 16-byte RED per lane and 16 x 8 tile;
    // in passes of DQ columns, so its accumulator stays small beside dK and dV (Kt::kDqCols).
    // kOrderedDq: the first pass's products are computed before the wait, the release follows the
    // last pass's adds.
    if constexpr (Kt::kWithDq) {
      const int dq_row0 = m0 + q_row0;  // this warp's first dQ row
      if (!kOrderedDq || dq_row0 < T) {
        int* sem = nullptr;
#pragma unroll
        for (int pass = 0; pass < DW / DQ; ++pass) {
          const int c0 = w2 * DW + pass * DQ;  // first dQ column of the pass
          float acc_dq[MQ / 16][DQ / 8][4];
          zero_fragments(acc_dq);
#pragma unroll
          for (int kk = 0; kk < BN / 16; ++kk) {
            uint32_t a[MQ / 16][4];
#pragma unroll
            for (int mi = 0; mi < MQ / 16; ++mi) load_a_frag<PS>(a[mi], sdS, q_row0 + mi * 16, kk, lane);
#pragma unroll
            for (int dj = 0; dj < DQ / 16; ++dj) {
              uint32_t kb[4];
              ldmatrix_x4_trans(kb, smem_u32(sK + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + c0 + dj * 16 +
                                              (lane >> 4) * 8));
#pragma unroll
              for (int mi = 0; mi < MQ / 16; ++mi) {
                mma_16816<kBF16>(acc_dq[mi][2 * dj], a[mi], kb[0], kb[1]);
                mma_16816<kBF16>(acc_dq[mi][2 * dj + 1], a[mi], kb[2], kb[3]);
              }
            }
          }
          if constexpr (kOrderedDq) {
            if (pass == 0) {
              const int expected = dq_blocks_above<kDocMask>(p, b, m0, m1, blk.n_block, blk.n_blocks, BN, lane);
              const int64_t tiles32 = (T + 31) / 32;
              sem = dq_semaphore + (bh * tiles32 + dq_row0 / 32) * 4 + ((dq_row0 / 16) & 1) * 2 + w2;
              if (lane == 0)
                while (ld_acquire_gpu(sem) != expected) {
                }
              __syncwarp();
            }
          }
#pragma unroll
          for (int mi = 0; mi < MQ / 16; ++mi)
#pragma unroll
            for (int j = 0; j < DQ / 8; ++j) {
              const int64_t chunk = DqLayout::chunk(dq_row0 / 16 + mi, c0 / 8 + j, lane);
              if constexpr (kFixedDq)
                fixed_adder.add4(dq_fixed + DqLayout::fixed_word(chunk, lane), acc_dq[mi][j][0], acc_dq[mi][j][1],
                                 acc_dq[mi][j][2], acc_dq[mi][j][3]);
              else
                atomicAdd(reinterpret_cast<float4*>(dq_accum + chunk),
                          make_float4(acc_dq[mi][j][0], acc_dq[mi][j][1], acc_dq[mi][j][2], acc_dq[mi][j][3]));
            }
        }
        if constexpr (kOrderedDq) {
          __syncwarp();
          if (lane == 0) red_release_gpu_add(sem, 1);
        }
      }
    }
    m = mn;
    stage ^= 1;
  }
  if constexpr (kFixedDq && Kt::kWithDq) fixed_adder.flag_overflow(dq_fixed_flag<D>(p.dq_accum, p.B * p.H, bh, T));
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with sK, sV (phase 4) before they stage the output

  // dK *= scale; stage dK, dV through this warp's rows of sK, sV (phase 3 layout); 16-byte stores
  // of whole rows once the CTA has staged them all.
  uint16_t* dk = static_cast<uint16_t*>(p.dk) + b * p.dk_batch_stride + h * p.dk_head_stride;
  uint16_t* dv = static_cast<uint16_t*>(p.dv) + b * p.dv_batch_stride + h * p.dv_head_stride;
#pragma unroll
  for (int mi = 0; mi < NK / 16; ++mi)
#pragma unroll
    for (int j = 0; j < DW / 8; ++j)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int off = (k_row0 + mi * 16 + (lane >> 2) + 8 * half) * S + w2 * DW + j * 8 + 2 * (lane & 3);
        *reinterpret_cast<uint32_t*>(sK + off) =
            pack2<kBF16>(acc_dk[mi][j][2 * half] * p.softmax_scale, acc_dk[mi][j][2 * half + 1] * p.softmax_scale);
        *reinterpret_cast<uint32_t*>(sV + off) = pack2<kBF16>(acc_dv[mi][j][2 * half], acc_dv[mi][j][2 * half + 1]);
      }
  __syncthreads();
  constexpr int kChunksPerRow = D / 8;
  for (int i = tid; i < BN * kChunksPerRow; i += NT) {
    const int r = i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    const int key = n0 + r;
    if (key < T) {
      *reinterpret_cast<uint4*>(dk + key * p.dk_row_stride + c) = *reinterpret_cast<const uint4*>(sK + r * S + c);
      *reinterpret_cast<uint4*>(dv + key * p.dv_row_stride + c) = *reinterpret_cast<const uint4*>(sV + r * S + c);
    }
  }
}

}  // namespace ft::cuda::flash
