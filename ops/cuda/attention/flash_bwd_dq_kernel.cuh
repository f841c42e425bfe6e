// Flash attention backward, dQ on its own (the second kernel of the deterministic backward without
// dropout; flash_launch.cuh).
//
// One CTA per (block of kBlockM query rows, batch * head), shaped like the forward kernel: Q and dO
// rows are loaded once into registers (A fragments), K and V tiles stream through shared memory
// (double-buffered with cp.async), and for each key tile the CTA recomputes
//   S  = Q K^T,  P = exp(S * scale - lse)     (lse from the forward: no online softmax)
//   dP = dO V^T, dS = P o (dP o Z - D)         (Z = keep * keep_scale, D = rowsum(dO o O))
//   dQ += dS K                                 (dS straight from the accumulators, as P in O += P V)
// then writes dQ * softmax_scale once. Each dQ element is one thread's sum over the key tiles in
// ascending order: no atomics, so dq is bit-identical run to run. The price is recomputing S and
// dP (the dK / dV kernel computes them too): 3 products per tile here against the 1 product of the
// dQ phase it replaces (bench/attention/NOTES.md has the measured trade).
// The dropout keep bits are the forward's (same rows x keys layout, dropout_keep_bits_slab).
#pragma once

#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"

namespace ft::cuda::flash {

// Shared memory: Q and dO tiles, K and V tiles x 2 stages.
template <class Kt>
constexpr int flash_bwd_dq_smem_bytes() {
  return (2 * Kt::kBlockM + 4 * Kt::kBlockN) * Kt::kSmemStride * 2;
}

// kDocMask: as flash_fwd_kernel's (no document-mask code without it, for the registers).
template <class Kt, bool kBF16, bool kDropout, bool kDocMask>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocksPerSm)
    flash_bwd_dq_kernel(const AttentionParams p, int heads_per_group) {
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, S = Kt::kSmemStride;
  constexpr int MT = Kt::kMTiles, NT = Kt::kNThreads;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint16_t* sQ = reinterpret_cast<uint16_t*>(smem_raw);  // BM x S (reused for dQ at the end)
  uint16_t* sdO = sQ + BM * S;                           // BM x S
  uint16_t* sK = sdO + BM * S;                           // 2 stages x BN x S
  uint16_t* sV = sK + 2 * BN * S;                        // 2 stages x BN x S

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int T = p.T;
  const QueryBlock<BM, BN, kDocMask> blk(p, heads_per_group);
  const int bh = blk.bh, m0 = blk.m0, m1 = blk.m1, n_end = blk.n_end;
  const int warp_row0 = warp * MT * 16;
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: before any dropout_bits

  const int b = blk.b, h = blk.h;
  const uint16_t *q = blk.q, *k = blk.k, *v = blk.v;
  const uint16_t* dout = head_rows(static_cast<const uint16_t*>(p.dout), b, h, p.do_batch_stride, p.do_head_stride);
  uint16_t* dq = head_rows(static_cast<uint16_t*>(p.dq), b, h, p.dq_batch_stride, p.dq_head_stride);
  const float* lse = p.lse + static_cast<int64_t>(bh) * T;
  const float* dsum = p.dsum + static_cast<int64_t>(bh) * T;
  auto next_tile = [&](int n) { return blk.next_key_tile(p, n); };
  auto load_kv = [&](int n, int stage) {
    load_rows_async<BN, D, S, NT>(sK + stage * BN * S, k, p.k_row_stride, n * BN, T, tid);
    load_rows_async<BN, D, S, NT>(sV + stage * BN * S, v, p.v_row_stride, n * BN, T, tid);
  };

  load_rows_async<BM, D, S, NT>(sQ, q, p.q_row_stride, m0, T, tid);
  load_rows_async<BM, D, S, NT>(sdO, dout, p.do_row_stride, m0, T, tid);
  cp_async_commit();
  int n = next_tile(blk.n_begin);
  if (n < n_end) load_kv(n, 0);
  cp_async_commit();

  // lse (as log2, +inf for a row that sees no key: its P row is zero) and D of this thread's rows.
  float lse_log2[MT][2], d_row[MT][2];
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = m0 + warp_row0 + mi * 16 + (lane >> 2) + 8 * half;
      const float l = row < T ? lse[row] : 0.f;
      lse_log2[mi][half] = l == -INFINITY ? INFINITY : l * kLog2e;
      d_row[mi][half] = row < T ? dsum[row] : 0.f;
    }
  cp_async_wait<1>();
  __syncthreads();

  // Q and dO A fragments, in registers for the whole pass (re-reading dO from shared memory per
  // tile saved 16 registers and lost 6% at T = 4096, p = 0), or (not Kt::kQInRegs: D = 256, whose
  // 16 x 256 fp32 dQ accumulator alone takes 128 registers) re-read for every key tile.
  constexpr int kQFrags = Kt::kQInRegs ? D / 16 : 1;
  uint32_t qf[MT][kQFrags][4], df[MT][kQFrags][4];
  if constexpr (Kt::kQInRegs) {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        load_a_frag<S>(qf[mi][kk], sQ, warp_row0 + mi * 16, kk, lane);
        load_a_frag<S>(df[mi][kk], sdO, warp_row0 + mi * 16, kk, lane);
      }
  }

  float acc_dq[MT][D / 8][4];
  zero_fragments(acc_dq);
  const float scale_log2 = p.softmax_scale * kLog2e;
  const float keep_scale = kDropout ? drop.keep_scale : 1.f;

  int stage = 0;
  while (n < n_end) {
    const int nn = next_tile(n + 1);
    const int n0 = n * BN, n1 = min(n0 + BN, T);
    cp_async_wait<0>();
    __syncthreads();  // tile n visible; everyone is done with the other stage
    if (nn < n_end) load_kv(nn, stage ^ 1);
    cp_async_commit();

    uint32_t keep_bits[MT][2];
    if constexpr (kDropout) {
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
        dropout_keep_bits_slab<BN / 8>(drop, bh, m0 + warp_row0 + mi * 16, n0, lane, keep_bits[mi]);
    }

    // S = Q K^T and dP = dO V^T for this warp's rows.
    float acc_s[MT][BN / 8][4], acc_dp[MT][BN / 8][4];
    zero_fragments(acc_s);
    zero_fragments(acc_dp);
    const uint16_t* sKs = sK + stage * BN * S;
    const uint16_t* sVs = sV + stage * BN * S;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4], da[MT][4];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        a_frag<Kt::kQInRegs, S>(qa[mi], qf[mi], sQ, warp_row0 + mi * 16, kk, lane);
        a_frag<Kt::kQInRegs, S>(da[mi], df[mi], sdO, warp_row0 + mi * 16, kk, lane);
      }
#pragma unroll
      for (int nj = 0; nj < BN / 16; ++nj) {
        const int off = (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * S + kk * 16 + ((lane >> 3) & 1) * 8;
        uint32_t kb[4], vb[4];
        ldmatrix_x4(kb, smem_u32(sKs + off));
        ldmatrix_x4(vb, smem_u32(sVs + off));
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          mma_16816<kBF16>(acc_s[mi][2 * nj], qa[mi], kb[0], kb[1]);
          mma_16816<kBF16>(acc_s[mi][2 * nj + 1], qa[mi], kb[2], kb[3]);
          mma_16816<kBF16>(acc_dp[mi][2 * nj], da[mi], vb[0], vb[1]);
          mma_16816<kBF16>(acc_dp[mi][2 * nj + 1], da[mi], vb[2], vb[3]);
        }
      }
    }

    // Masked pairs: S = -inf (P = 0), in a pass only partial tiles take (flash_bwd_kernel.cuh: why).
    if (attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileFull || n0 + BN > T) {
      mask_scores<kDocMask>(acc_s, p, b, [&](int mi, int nb, int e) {
        return make_int2(m0 + warp_row0 + mi * 16 + (lane >> 2) + 8 * (e >> 1), n0 + nb * 8 + 2 * (lane & 3) + (e & 1));
      });
    }
    // dS = P o (dP o Z - D), into acc_s.
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int half = e >> 1;
          const float pe = fast_exp2(fmaf(acc_s[mi][nb][e], scale_log2, -lse_log2[mi][half]));
          float z = keep_scale;
          if constexpr (kDropout) z = ((keep_bits[mi][half] >> (2 * nb + (e & 1))) & 1u) ? keep_scale : 0.f;
          acc_s[mi][nb][e] = pe * (acc_dp[mi][nb][e] * z - d_row[mi][half]);
        }

    // dQ += dS K, dS straight from registers, K rows transposed on load.
    mma_acc_by_smem<kBF16, MT, BN, D, S>(acc_dq, acc_s, sKs, lane);
    n = nn;
    stage ^= 1;
  }
  cp_async_wait<0>();

  // dQ * scale, staged through this warp's own rows of sQ, then 16-byte stores.
  auto at = [&](int r, int c) { return sQ + r * S + c; };
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) stage_rows<kBF16, D>(acc_dq[mi], p.softmax_scale, warp_row0 + mi * 16, at, lane);
  __syncwarp();
  store_staged_rows<MT * 16, D>(dq, p.dq_row_stride, warp_row0, m0, T, at, lane);
}

}  // namespace ft::cuda::flash
