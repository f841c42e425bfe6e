// Tile movement shared by the flash kernels: rows of a (B, T, H, D) tensor into padded shared
// memory with cp.async, and the keep bits of a dropout tile.
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_ptx.cuh"

namespace ft::cuda::flash {

// Launch order of the (block, batch*head) CTAs of a 1-D grid: heads in groups of `group` (the
// grid's last group may be smaller); inside a group the block rank is the slow index and the head
// the fast one, so every head's rank-0 block (the longest under a causal mask) starts before any
// rank-1 block of its group. With group = 1 this is the plain (rank fastest, then head) order; a
// larger group moves the long blocks of the last heads away from the end of the grid (less tail)
// while the CTAs in flight still cover only ~group heads (their Q, dO, dQ stay in L2).
struct BlockOrder {
  int rank, bh;
};
__device__ __forceinline__ BlockOrder grouped_block_order(int linear, int n_ranks, int n_bh,
                                                          int group) {
  const int per_group = group * n_ranks;
  const int g = linear / per_group;
  const int r = linear - g * per_group;
  const int gg = min(group, n_bh - g * group);
  return {r / gg, g * group + r % gg};
}

// Element (b, 0, h, 0) of a (B, T, H, D) tensor of 16-bit elements.
template <class T>
__device__ __forceinline__ T* head_rows(T* base, int b, int h, int64_t batch_stride, int64_t head_stride) {
  return base + b * batch_stride + h * head_stride;
}

// The work of a query-major CTA (forwards, the dQ kernel): query rows [m0, m1) of (batch b, head h),
// picked in grouped_block_order with the longest causal blocks first, that head's q and o rows and
// the k, v rows of its K/V head (attention_kv_head), and the key tiles of kBlockN keys it visits:
// next_key_tile(n) is the first tile >= n that the mask leaves non-empty (n_end when none is left);
// n_begin is where the search starts (the tile of the block's first document start under a
// document mask, so the tiles before it cost nothing). kDocMask: attention_params.h (false: no
// document-mask code, for the registers).
template <int kBlockM, int kBlockN, bool kDocMask>
struct QueryBlock {
  int bh, b, h, m0, m1, n_begin, n_end;
  const uint16_t *q, *k, *v;
  uint16_t* o;

  // linear: the block's place in grouped_block_order (a persistent kernel walks several; else the CTA's).
  __device__ __forceinline__ QueryBlock(const AttentionParams& p, int heads_per_group,
                                        int linear = static_cast<int>(blockIdx.x)) {
    const int m_blocks = (p.T + kBlockM - 1) / kBlockM;
    const BlockOrder order = grouped_block_order(linear, m_blocks, p.B * p.H, heads_per_group);
    bh = order.bh, b = bh / p.H, h = bh % p.H;
    m0 = (m_blocks - 1 - order.rank) * kBlockM, m1 = min(m0 + kBlockM, p.T);
    const int n_blocks = (p.T + kBlockN - 1) / kBlockN;
    n_end = p.causal ? min(n_blocks, (m1 - 1) / kBlockN + 1) : n_blocks;
    n_begin = attention_doc_start<kDocMask>(p, b, m0) / kBlockN;
    q = head_rows(static_cast<const uint16_t*>(p.q), b, h, p.q_batch_stride, p.q_head_stride);
    const int hk = attention_kv_head(p, h);  // grouped-query attention: the shared K/V head
    k = head_rows(static_cast<const uint16_t*>(p.k), b, hk, p.k_batch_stride, p.k_head_stride);
    v = head_rows(static_cast<const uint16_t*>(p.v), b, hk, p.v_batch_stride, p.v_head_stride);
    o = head_rows(static_cast<uint16_t*>(p.o), b, h, p.o_batch_stride, p.o_head_stride);
  }
  __device__ __forceinline__ int next_key_tile(const AttentionParams& p, int n) const {
    for (; n < n_end; ++n)
      if (attention_tile_kind<kDocMask>(p, b, m0, m1, n * kBlockN, min(n * kBlockN + kBlockN, p.T)) != kTileEmpty)
        break;
    return n;
  }
};

// The work of a key-major CTA (the backward kernels): keys [n0, n1) of (batch b, query head h),
// picked in grouped_block_order (descending: the shortest causal block first, else the longest),
// that head's rows (k, v: those of its K/V head; the dK, dV it writes are this query head's
// partials), and the query tiles of kBlockM rows the CTA visits: next_query_tile(m) is the first
// tile >= m the mask leaves non-empty (m_blocks when none is left). load_query_tile issues the
// cp.async copies of tile m's Q, dO (kSmemStride-padded rows), lse and D into one stage. kDocMask:
// as QueryBlock's.
template <int kBlockM, int kBlockN, int kHeadDim, int kSmemStride, int kThreads, bool kDocMask>
struct KeyBlock {
  int bh, b, h, n_blocks, n_block, n0, n1, m_blocks, m_begin;
  const uint16_t *q, *k, *v, *dout;
  const float *lse, *dsum;

  // linear: the work's place in grouped_block_order (a persistent kernel's work item; else the CTA's).
  __device__ __forceinline__ KeyBlock(const AttentionParams& p, int heads_per_group, bool descending,
                                      int linear = static_cast<int>(blockIdx.x)) {
    n_blocks = (p.T + kBlockN - 1) / kBlockN;
    const BlockOrder order = grouped_block_order(linear, n_blocks, p.B * p.H, heads_per_group);
    n_block = descending ? n_blocks - 1 - order.rank : order.rank;
    bh = order.bh, b = bh / p.H, h = bh % p.H;
    n0 = n_block * kBlockN, n1 = min(n0 + kBlockN, p.T);
    m_blocks = (p.T + kBlockM - 1) / kBlockM;
    m_begin = p.causal ? n0 / kBlockM : 0;
    q = head_rows(static_cast<const uint16_t*>(p.q), b, h, p.q_batch_stride, p.q_head_stride);
    const int hk = attention_kv_head(p, h);  // grouped-query attention: the shared K/V head
    k = head_rows(static_cast<const uint16_t*>(p.k), b, hk, p.k_batch_stride, p.k_head_stride);
    v = head_rows(static_cast<const uint16_t*>(p.v), b, hk, p.v_batch_stride, p.v_head_stride);
    dout = head_rows(static_cast<const uint16_t*>(p.dout), b, h, p.do_batch_stride, p.do_head_stride);
    lse = p.lse + static_cast<int64_t>(bh) * p.T;
    dsum = p.dsum + static_cast<int64_t>(bh) * p.T;
  }
  __device__ __forceinline__ int next_query_tile(const AttentionParams& p, int m) const {
    for (; m < m_blocks; ++m) {
      // Document starts only grow along the rows: once they pass this block's last key, every later
      // tile is empty too (without the stop a block near the start of a long row would read one
      // start per remaining tile, serially).
      if constexpr (kDocMask)
        if (attention_doc_start(p, b, m * kBlockM) > n1 - 1) return m_blocks;
      if (attention_tile_kind<kDocMask>(p, b, m * kBlockM, min(m * kBlockM + kBlockM, p.T), n0, n1) != kTileEmpty)
        break;
    }
    return m;
  }
  // kLse false: not the lse (a kernel that converts it on the way in loads it itself).
  template <bool kLse = true>
  __device__ __forceinline__ void load_query_tile(const AttentionParams& p, int m, uint16_t* sQ, uint16_t* sdO,
                                                  float* sLse, float* sDsum, int tid) const;
  // K and V rows of the block (one cp.async group with whatever the caller adds).
  __device__ __forceinline__ void load_keys(const AttentionParams& p, uint16_t* sK, uint16_t* sV, int tid) const;
};

// Whether the call's mask is at most causal and the sequence's end (no block-sparse pattern, no
// document mask): then the masking passes below test a score with one to three compares, without
// branches. attention_allowed's general test (a block-sparse pattern's divisions behind a runtime
// branch) compiled to about 60 instructions a score, nearly all skipped, which at T = 1024 put the
// warp-specialised forward's masked tiles at the mercy of the instruction cache: ncu (H200, D = 128,
// session 27) sampled 17% of its warps stalled on instruction fetch, in that code.
template <bool kDocMask>
__device__ __forceinline__ bool mask_is_causal_only(const AttentionParams& p) {
  return p.block_size <= 0 && (!kDocMask || p.doc_start == nullptr);
}

// Sets acc[i][nb][e] to -inf where masked(at(i, nb, e)).
template <int kI, int kNb, class At, class Masked>
__device__ __forceinline__ void mask_scores_where(float (&acc)[kI][kNb][4], At at, Masked masked) {
#pragma unroll
  for (int i = 0; i < kI; ++i)
#pragma unroll
    for (int nb = 0; nb < kNb; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (masked(at(i, nb, e))) acc[i][nb][e] = -INFINITY;
}

// Sets the scores of masked pairs, and of rows or keys past T, to -inf (so P = exp2(S - lse) = 0)
// in a warp's score fragments acc[i][nb][e] of batch b; at(i, nb, e) is the (query row, key) of an element.
// The backward kernels take this pass only for partial tiles rather than testing the mask per
// element: those branches cut the elementwise code into basic blocks that the compiler cannot
// interleave (bench/attention/NOTES.md, session 5). kDocMask: attention_params.h.
template <bool kDocMask, int kI, int kNb, class At>
__device__ __forceinline__ void mask_scores(float (&acc)[kI][kNb][4], const AttentionParams& p, int b, At at) {
  const int T = p.T;
  if (mask_is_causal_only<kDocMask>(p)) {  // branch-free: see mask_is_causal_only
    const bool causal = p.causal;
    return mask_scores_where(acc, at, [&](int2 rk) { return (rk.x >= T) | (rk.y >= T) | (causal & (rk.y > rk.x)); });
  }
  mask_scores_where(acc, at, [&](int2 rk) {
    return rk.x >= T || rk.y >= T || !attention_allowed<kDocMask>(p, b, rk.x, rk.y);
  });
}

// The same pass for one row of fragments, acc[nb][e] with at(nb, e) (the warp-specialised backward's
// transposed tiles).
template <bool kDocMask, int kNb, class At>
__device__ __forceinline__ void mask_scores(float (&acc)[kNb][4], const AttentionParams& p, int b, At at) {
  auto& rows = reinterpret_cast<float (&)[1][kNb][4]>(acc);
  mask_scores<kDocMask>(rows, p, b, [&](int, int nb, int e) { return at(nb, e); });
}

// The forwards' form of the same pass, for one warp's 16-row slab of scores in the accumulator
// layout (acc[nb][e]: row row0 + lane / 4 + 8 (e >> 1), key n0 + 8 nb + 2 (lane % 4) + (e & 1)):
// masked pairs and keys past T to -inf. Rows past T keep their scores: the forwards never store
// those rows. The callers take it only for partial tiles, as the backwards do.
// T: p.T, passed as the caller holds it (reading p.T here moved the kernels' parameter loads).
template <bool kDocMask, int kNb>
__device__ __forceinline__ void mask_slab_scores(float (&acc)[kNb][4], const AttentionParams& p, int b, int row0,
                                                 int n0, int T, int lane) {
  if (mask_is_causal_only<kDocMask>(p)) {
    // A row's last key: its own (causal) or T - 1; one compare a score (see mask_is_causal_only).
    int last[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + (lane >> 2) + 8 * half;
      last[half] = p.causal ? min(row, T - 1) : T - 1;
    }
    const int col0 = n0 + 2 * (lane & 3);
#pragma unroll
    for (int nb = 0; nb < kNb; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (col0 + nb * 8 + (e & 1) > last[e >> 1]) acc[nb][e] = -INFINITY;
    return;
  }
#pragma unroll
  for (int nb = 0; nb < kNb; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + (lane >> 2) + 8 * (e >> 1);
      const int col = n0 + nb * 8 + 2 * (lane & 3) + (e & 1);
      if (col >= T || !attention_allowed<kDocMask>(p, b, row, col)) acc[nb][e] = -INFINITY;
    }
}

// The online softmax's row maximum: the max of `init` and a row's scores in this warp's
// accumulators (rows lane / 4 + 8 half; kTiles n8 tiles), over the quad of lanes that holds the row.
template <int kTiles>
__device__ __forceinline__ float quad_row_max(const float (&acc)[kTiles][4], int half, float init) {
  float mx = init;
#pragma unroll
  for (int nb = 0; nb < kTiles; ++nb) mx = fmaxf(mx, fmaxf(acc[nb][2 * half], acc[nb][2 * half + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
}

// The forwards' normalisation: each row's partial sums (row_sum[half]: rows lane / 4 + 8 half of
// the warp's slab, this lane's columns) are summed over the quad of lanes that holds the row, left
// in row_sum, and the row's accumulators are multiplied by numerator / sum (0 for an empty row).
// kQuadSum false: row_sum already holds the whole rows' sums (in every lane of the quad).
template <int D, bool kQuadSum = true>
__device__ __forceinline__ void normalize_rows(float (&acc)[D / 8][4], float (&row_sum)[2], float numerator) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    if constexpr (kQuadSum) {
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    }
    row_sum[half] = sum;
    const float inv = sum > 0.f ? numerator / sum : 0.f;
#pragma unroll
    for (int dj = 0; dj < D / 8; ++dj) {
      acc[dj][2 * half] *= inv;
      acc[dj][2 * half + 1] *= inv;
    }
  }
}

// The output path of the query-major kernels: a warp writes its accumulator rows into its own rows
// of a shared tile (stage_rows, one 16-row slab at a time, times `scale`), then, after __syncwarp,
// copies them to global memory with 16-byte stores (store_staged_rows). at(r, c) is the address of
// local row r, column c in the shared tile, so padded and swizzled layouts both serve.
template <bool kBF16, int D, class At>
__device__ __forceinline__ void stage_rows(const float (&acc)[D / 8][4], float scale, int slab_row0, At at,
                                           int lane) {
#pragma unroll
  for (int dj = 0; dj < D / 8; ++dj)
#pragma unroll
    for (int half = 0; half < 2; ++half)
      *reinterpret_cast<uint32_t*>(at(slab_row0 + (lane >> 2) + 8 * half, dj * 8 + 2 * (lane & 3))) =
          pack2<kBF16>(acc[dj][2 * half] * scale, acc[dj][2 * half + 1] * scale);
}
// Local rows [warp_row0, warp_row0 + kRows) -> rows m0 + r of `out` (row stride in elements);
// rows >= T are skipped.
template <int kRows, int D, class At>
__device__ __forceinline__ void store_staged_rows(uint16_t* out, int64_t row_stride, int warp_row0, int m0, int T,
                                                  At at, int lane) {
  constexpr int kChunksPerRow = D / 8;
#pragma unroll
  for (int i = lane; i < kRows * kChunksPerRow; i += 32) {
    const int r = warp_row0 + i / kChunksPerRow, c = (i % kChunksPerRow) * 8;
    const int row = m0 + r;
    if (row < T) *reinterpret_cast<uint4*>(out + row * row_stride + c) = *reinterpret_cast<const uint4*>(at(r, c));
  }
}

// Copies rows [row0, row0 + kRows) (rows >= T become zeros) of one head: `base` points at element
// (b, 0, h, 0); rows are `row_stride` elements apart, kHeadDim contiguous 16-bit elements each.
// Issued by all kThreads threads; the caller commits the cp.async group.
template <int kRows, int kHeadDim, int kSmemStride, int kThreads>
__device__ __forceinline__ void load_rows_async(uint16_t* smem, const uint16_t* base,
                                                int64_t row_stride, int row0, int T, int tid) {
  constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % kThreads == 0, "tile chunks divide evenly among threads");
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int chunk = tid + i * kThreads;
    const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * 8;
    const int row = row0 + r;
    const bool valid = row < T;
    const uint16_t* src = base + (valid ? static_cast<int64_t>(row) * row_stride : 0) + c;
    cp_async_16(smem_u32(smem + r * kSmemStride + c), src, valid ? 16 : 0);
  }
}

// Copies kRows floats of a (B*H, T) fp32 row vector starting at row0 (past T: zeros).
template <int kRows, int kThreads>
__device__ __forceinline__ void load_vec_async(float* smem, const float* base, int row0, int T,
                                               int tid) {
  for (int r = tid; r < kRows; r += kThreads) {
    const bool valid = row0 + r < T;
    cp_async_4(smem_u32(smem + r), base + (valid ? row0 + r : 0), valid ? 4 : 0);
  }
}

// A full tile (m0 + kBlockM <= T) takes a shorter path than load_rows_async: each thread's chunks
// are rows row + i * kRoundRows, column col of the tile, so one 64-bit product per source replaces
// the per-chunk row bounds and index arithmetic, and lse and D are loaded by different warps. (The
// 4-warp backward spent about 115 instructions of a 32-query tile on the general path; SASS,
// session 8.) Partial tiles and thread counts that do not divide the tile take the general path.
template <int kBlockM, int kBlockN, int kHeadDim, int kSmemStride, int kThreads, bool kDocMask>
template <bool kLse>
__device__ __forceinline__ void KeyBlock<kBlockM, kBlockN, kHeadDim, kSmemStride, kThreads, kDocMask>::load_query_tile(
    const AttentionParams& p, int m, uint16_t* sQ, uint16_t* sdO, float* sLse, float* sDsum, int tid) const {
  constexpr int kChunksPerRow = kHeadDim / 8, kRoundRows = kThreads / kChunksPerRow;
  constexpr bool kEven = kThreads % kChunksPerRow == 0 && kBlockM % kRoundRows == 0 && 2 * kBlockM <= kThreads &&
                         kBlockM % 32 == 0;
  const int m0 = m * kBlockM;
  if (kEven && m0 + kBlockM <= p.T) {
    const int row = tid / kChunksPerRow, col = (tid % kChunksPerRow) * 8;
    const uint16_t* qs = q + (m0 + row) * p.q_row_stride + col;
    const uint16_t* ds = dout + (m0 + row) * p.do_row_stride + col;
#pragma unroll
    for (int i = 0; i < kBlockM / kRoundRows; ++i) {
      const int off = (row + i * kRoundRows) * kSmemStride + col;
      cp_async_16(smem_u32(sQ + off), qs + i * kRoundRows * p.q_row_stride, 16);
      cp_async_16(smem_u32(sdO + off), ds + i * kRoundRows * p.do_row_stride, 16);
    }
    if (tid < kBlockM) {
      if (kLse) cp_async_4(smem_u32(sLse + tid), lse + m0 + tid, 4);
    } else if (tid < 2 * kBlockM) cp_async_4(smem_u32(sDsum + tid - kBlockM), dsum + m0 + tid - kBlockM, 4);
    return;
  }
  load_rows_async<kBlockM, kHeadDim, kSmemStride, kThreads>(sQ, q, p.q_row_stride, m * kBlockM, p.T, tid);
  load_rows_async<kBlockM, kHeadDim, kSmemStride, kThreads>(sdO, dout, p.do_row_stride, m * kBlockM, p.T, tid);
  if (kLse) load_vec_async<kBlockM, kThreads>(sLse, lse, m * kBlockM, p.T, tid);
  load_vec_async<kBlockM, kThreads>(sDsum, dsum, m * kBlockM, p.T, tid);
}
template <int kBlockM, int kBlockN, int kHeadDim, int kSmemStride, int kThreads, bool kDocMask>
__device__ __forceinline__ void KeyBlock<kBlockM, kBlockN, kHeadDim, kSmemStride, kThreads, kDocMask>::load_keys(
    const AttentionParams& p, uint16_t* sK, uint16_t* sV, int tid) const {
  load_rows_async<kBlockN, kHeadDim, kSmemStride, kThreads>(sK, k, p.k_row_stride, n0, p.T, tid);
  load_rows_async<kBlockN, kHeadDim, kSmemStride, kThreads>(sV, v, p.v_row_stride, n0, p.T, tid);
}

// The Philox words of this lane's eight elements of the 16 x 16 accumulator tile at (row0, col0),
// both multiples of 16. Word 2h + t holds row row0 + lane / 4 + 8h, columns
// col0 + 8t + 2 (lane % 4) + {0: low half, 1: high half}: the C fragment elements of rows h and n8
// tiles t, so every lane draws exactly its own bits.
__device__ __forceinline__ PhiloxBits dropout_tile_bits(const DropoutParams& d, uint64_t slice, int row0,
                                                        int col0, int lane) {
  return dropout_bits(d, slice, dropout_row_pair(static_cast<uint32_t>(row0)) + static_cast<uint32_t>(lane >> 2),
                      dropout_col_group(static_cast<uint32_t>(col0)) + static_cast<uint32_t>(lane & 3));
}

// Keep bits of one warp's 16 keys x kBlockM queries of a transposed score tile (S^T: accumulator rows
// are keys, columns queries; the backward kernels' layout). Element [nb][e] of the warp's accumulator
// is query m0 + 8 nb + 2c + (e & 1), key key0 + r + 8 (e >> 1) (r = lane / 4, c = lane % 4); its
// Philox call (dropout_mask.h) is the one of query rows m0 + 16 (nb / 2) + 2c + (e & 1) (+ 8) and key
// group r / 2 of the 16 keys; its piece is half r % 2 of word 2 (nb % 2) + (e >> 1). So lanes r and
// r ^ 1 (lane ^ 4) need the same calls and different halves: a lane draws the calls with
// e & 1 = r % 2, keeps its half and hands the other half to its partner in one shuffle. Bit 4 nb + e
// of the result is element [nb][e].
template <int kBlockM>
__device__ __forceinline__ uint32_t transposed_tile_keep_bits(const DropoutParams& drop, int bh, int m0, int key0,
                                                              int lane) {
  static_assert(kBlockM % 16 == 0 && kBlockM / 2 <= 32, "keep-bit layout: one word per 16 keys");
  const int r = lane >> 2, c = lane & 3, s = r & 1;
  const uint32_t bound = dropout_bound(drop);
  uint32_t lo = 0, hi = 0;  // pieces of the even / odd key, at bit 4 nb + e - (e & 1)
#pragma unroll
  for (int i = 0; i < kBlockM / 16; ++i) {
    const PhiloxBits w =
        dropout_bits(drop, bh, dropout_row_pair(static_cast<uint32_t>(m0 + 16 * i)) + static_cast<uint32_t>(2 * c + s),
                     dropout_col_group(static_cast<uint32_t>(key0)) + static_cast<uint32_t>(r >> 1));
#pragma unroll
    for (int wd = 0; wd < 4; ++wd) {
      const int pos = 4 * (2 * i + (wd >> 1)) + 2 * (wd & 1);
      lo |= static_cast<uint32_t>(dropout_keep_lo(w.v[wd], bound)) << pos;
      hi |= static_cast<uint32_t>(dropout_keep_hi(w.v[wd], bound)) << pos;
    }
  }
  const uint32_t own = (s ? hi : lo) << s, other = (s ? lo : hi) << s;
  return own | __shfl_xor_sync(0xffffffffu, other, 4);
}

// Keep bits of this lane's two rows of a 16-row slab, kTiles n8 tiles wide (one Philox call per two
// tiles): bits[h] bit 2j + e = keep (row0 + lane / 4 + 8h, col0 + 8j + 2 (lane % 4) + e).
template <int kTiles>
__device__ __forceinline__ void dropout_keep_bits_slab(const DropoutParams& d, uint64_t slice, int row0,
                                                       int col0, int lane, uint32_t (&bits)[2]) {
  static_assert(kTiles % 2 == 0 && kTiles <= 16, "whole 16-column calls, 32 keep bits per row at most");
  const uint32_t bound = dropout_bound(d);
  bits[0] = bits[1] = 0;
#pragma unroll
  for (int kb = 0; kb < kTiles / 2; ++kb) {
    const PhiloxBits w = dropout_tile_bits(d, slice, row0, col0 + 16 * kb, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const uint32_t word = w.v[2 * h + t];
        const int j = 2 * kb + t;
        bits[h] |= static_cast<uint32_t>(dropout_keep_lo(word, bound)) << (2 * j);
        bits[h] |= static_cast<uint32_t>(dropout_keep_hi(word, bound)) << (2 * j + 1);
      }
  }
}

}  // namespace ft::cuda::flash
