// Flash attention forward (FlashAttention-2 schedule, mma.sync tensor cores).
//
// One CTA per (block of kBlockM query rows, batch * head). Q is loaded once into registers (A
// fragments; at D = 256, not Kt::kQInRegs, re-read from shared memory for every key tile); K and V
// tiles of kBlockN keys stream through shared memory, double-buffered with cp.async so the next
// tile loads while this one computes. Each warp owns kMTiles x 16 query rows:
// S = Q K^T lands in accumulator registers, the online softmax (exp2 with log2(e) folded into the
// scale) updates the running max and sum of each row inside one quad, and P is repacked from the
// accumulator layout into A fragments for O += P V without touching shared memory. Tiles that the
// causal / block-sparse mask empties are never loaded; only tiles crossing the diagonal, a block
// boundary or the end of the sequence pay for the elementwise mask. Writes O and the fp32 lse only.
//
// Dropout (kDropout): each warp draws the keep bits of its own rows in registers (one Philox call
// per thread and 16 x 16 accumulator tile, dropout_mask.h: the call's eight pieces are the thread's
// own elements), independent of the matrix products so the scheduler overlaps the two. P is dropped
// after the row sum is taken (lse is of the undropped softmax); keep_scale is folded into 1 / l.
// (A first version drew the bits cooperatively into shared memory before the tile barrier: the
// tensor cores idled meanwhile and dropout 0.1 doubled the forward time on an H200.)
#pragma once

#include <cfloat>
#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"

namespace ft::cuda::flash {

// kDocMask: the document mask (p.doc_start) is compiled in (attention_params.h: without it no
// document-mask code, for the registers).
template <class Kt, bool kBF16, bool kDropout, bool kDocMask>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocksPerSm) flash_fwd_kernel(const AttentionParams p,
                                                                                  int heads_per_group) {
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, S = Kt::kSmemStride;
  constexpr int MT = Kt::kMTiles, NT = Kt::kNThreads;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  uint16_t* sQ = reinterpret_cast<uint16_t*>(smem_raw);  // BM x S (reused for O at the end)
  uint16_t* sK = sQ + BM * S;                            // 2 stages x BN x S
  uint16_t* sV = sK + 2 * BN * S;                        // 2 stages x BN x S

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int T = p.T;
  const QueryBlock<BM, BN, kDocMask> blk(p, heads_per_group);
  const int bh = blk.bh, b = blk.b, m0 = blk.m0, m1 = blk.m1, n_end = blk.n_end;
  const int warp_row0 = warp * MT * 16;  // first local row of this warp
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: before any dropout_bits

  const uint16_t *q = blk.q, *k = blk.k, *v = blk.v;
  uint16_t* o = blk.o;
  auto next_tile = [&](int n) { return blk.next_key_tile(p, n); };
  auto load_kv = [&](int n, int stage) {
    load_rows_async<BN, D, S, NT>(sK + stage * BN * S, k, p.k_row_stride, n * BN, T, tid);
    load_rows_async<BN, D, S, NT>(sV + stage * BN * S, v, p.v_row_stride, n * BN, T, tid);
  };

  load_rows_async<BM, D, S, NT>(sQ, q, p.q_row_stride, m0, T, tid);
  cp_async_commit();
  int n = next_tile(blk.n_begin);
  if (n < n_end) load_kv(n, 0);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  // Q A fragments: in registers for the whole pass, or (not Kt::kQInRegs) re-read from this warp's
  // rows of sQ for every key tile.
  constexpr int kQFrags = Kt::kQInRegs ? D / 16 : 1;
  uint32_t qf[MT][kQFrags][4];
  if constexpr (Kt::kQInRegs) {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) load_a_frag<S>(qf[mi][kk], sQ, warp_row0 + mi * 16, kk, lane);
  }

  float acc_o[MT][D / 8][4];
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
    for (int dj = 0; dj < D / 8; ++dj)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mi][dj][e] = 0.f;
    row_max[mi][0] = row_max[mi][1] = -INFINITY;
    row_sum[mi][0] = row_sum[mi][1] = 0.f;
  }
  const float scale_log2 = p.softmax_scale * kLog2e;

  int stage = 0;
  while (n < n_end) {
    const int nn = next_tile(n + 1);
    const int n0 = n * BN, n1 = min(n0 + BN, T);
    cp_async_wait<0>();
    __syncthreads();  // tile n (and its keep bits) visible; everyone is done with the other stage
    if (nn < n_end) load_kv(nn, stage ^ 1);
    cp_async_commit();

    uint32_t keep_bits[MT][2];
    if constexpr (kDropout) {
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
        dropout_keep_bits_slab<BN / 8>(drop, bh, m0 + warp_row0 + mi * 16, n0, lane, keep_bits[mi]);
    }

    // S = Q K^T for this warp's rows: MT x (BN / 8) accumulator tiles.
    float acc_s[MT][BN / 8][4];
    zero_fragments(acc_s);
    const uint16_t* sKs = sK + stage * BN * S;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      // Fragment kk of Q: qf's straight (copied into qa first, the D = 64 tiles took 7 more
      // registers and spilled more), or read into qa.
      uint32_t qa[MT][4];
      if constexpr (!Kt::kQInRegs) {
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) load_a_frag<S>(qa[mi], sQ, warp_row0 + mi * 16, kk, lane);
      }
      auto q_frag = [&](int mi) -> const uint32_t(&)[4] {
        if constexpr (Kt::kQInRegs) return qf[mi][kk];
        else return qa[mi];
      };
#pragma unroll
      for (int nj = 0; nj < BN / 16; ++nj) {
        uint32_t kb[4];
        ldmatrix_x4(kb, smem_u32(sKs + (nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * S + kk * 16 +
                                 ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          mma_16816<kBF16>(acc_s[mi][2 * nj], q_frag(mi), kb[0], kb[1]);
          mma_16816<kBF16>(acc_s[mi][2 * nj + 1], q_frag(mi), kb[2], kb[3]);
        }
      }
    }

    if (attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileFull || n0 + BN > T) {
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) mask_slab_scores<kDocMask>(acc_s[mi], p, b, m0 + warp_row0 + mi * 16, n0, T, lane);
    }

    // Online softmax: rescale the running output by exp(m_old - m_new), P = exp(S - m_new).
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float mx = row_max[mi][half];
#pragma unroll
        for (int nb = 0; nb < BN / 8; ++nb)
          mx = fmaxf(mx, fmaxf(acc_s[mi][nb][2 * half], acc_s[mi][nb][2 * half + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;  // all masked so far
        const float alpha = fast_exp2(row_max[mi][half] * scale_log2 - m_scaled);
        row_max[mi][half] = mx;
        row_sum[mi][half] *= alpha;
#pragma unroll
        for (int dj = 0; dj < D / 8; ++dj) {
          acc_o[mi][dj][2 * half] *= alpha;
          acc_o[mi][dj][2 * half + 1] *= alpha;
        }
        float sum = 0.f;
#pragma unroll
        for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
          for (int e = 2 * half; e < 2 * half + 2; ++e) {
            const float pe = fast_exp2(fmaf(acc_s[mi][nb][e], scale_log2, -m_scaled));
            acc_s[mi][nb][e] = pe;
            sum += pe;
          }
        row_sum[mi][half] += sum;  // partial over this thread's columns; reduced in the epilogue
      }
    }

    if constexpr (kDropout) {
#pragma unroll
      for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint32_t keep = keep_bits[mi][half];
#pragma unroll
          for (int nb = 0; nb < BN / 8; ++nb) {
            if (!((keep >> (2 * nb)) & 1u)) acc_s[mi][nb][2 * half] = 0.f;
            if (!((keep >> (2 * nb + 1)) & 1u)) acc_s[mi][nb][2 * half + 1] = 0.f;
          }
        }
    }

    // O += P V, P straight from registers.
    mma_acc_by_smem<kBF16, MT, BN, D, S>(acc_o, acc_s, sV + stage * BN * S, lane);
    n = nn;
    stage ^= 1;
  }
  cp_async_wait<0>();

  // Epilogue: O /= l (times keep_scale), lse = m * scale + ln(l); rows with no visible key get
  // O = 0 and lse = -inf.
  const float keep_scale = kDropout ? drop.keep_scale : 1.f;
  float* lse = p.lse + static_cast<int64_t>(bh) * T;
#pragma unroll
  for (int mi = 0; mi < MT; ++mi)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float sum = row_sum[mi][half];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.f ? keep_scale / sum : 0.f;
#pragma unroll
      for (int dj = 0; dj < D / 8; ++dj) {
        acc_o[mi][dj][2 * half] *= inv;
        acc_o[mi][dj][2 * half + 1] *= inv;
      }
      const int row = m0 + warp_row0 + mi * 16 + (lane >> 2) + 8 * half;
      if ((lane & 3) == 0 && row < T)
        lse[row] = sum > 0.f ? row_max[mi][half] * p.softmax_scale + logf(sum) : -INFINITY;
    }

  // Stage O through this warp's own rows of sQ (no other warp reads them), then 16-byte stores.
  auto at = [&](int r, int c) { return sQ + r * S + c; };
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) stage_rows<kBF16, D>(acc_o[mi], 1.f, warp_row0 + mi * 16, at, lane);
  __syncwarp();
  store_staged_rows<MT * 16, D>(o, p.o_row_stride, warp_row0, m0, T, at, lane);
}

}  // namespace ft::cuda::flash
