// The fixed-point dQ converted inside the backward, tile by tile, by the last key block to add into it.
//
// The separate conversion kernel (flash_bwd_preprocess.cuh) reads the whole int64 accumulator back
// from DRAM after the backward, which has long evicted it from L2 (at T = 4096, B = 4, 12 heads it is
// 100 MB). Here each key block, once its bulk add into a 64-row tile has completed, counts itself in
// on that tile's counter (flash_dq_accum.cuh); the block that brings the count to the number of key
// blocks that add into the tile reads the words (from L2: the other blocks added them moments ago),
// writes dQ, and drops the lines from L2 without writing them back (the next call's preprocess
// zeroes them again). The sum is an integer sum, so which block comes last does not change a bit,
// and the rounding is the conversion kernel's (double, then the dtype): the bits equal its output.
//
// Out of range: a tile to which any contribution was out of range becomes NaN (the counter's high
// bits count those contributions). The conversion kernel makes the whole head NaN instead; either
// way no wrong finite value comes out.
#pragma once

#include <cstdint>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_dq_accum.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"

namespace ft::cuda::flash {

// Counter increments: one per key block in the low 16 bits, one per out-of-range key block above.
constexpr int kDqTileCountMask = 0xFFFF;
constexpr int kDqTileOverflowUnit = 1 << 16;

// How many key blocks of kBlockN keys add into the 64-row tile [m0, m1) of batch b: those whose
// tile kind is not empty (KeyBlock::next_query_tile visits exactly those; no document mask here).
// A closed form without block sparsity; a walk over the key blocks with it.
template <int kBlockN>
__device__ __forceinline__ int dq_tile_contributors(const AttentionParams& p, int b, int m0, int m1, int n_blocks) {
  if (p.block_size == 0) return p.causal ? (m1 - 1) / kBlockN + 1 : n_blocks;
  int count = 0;
  for (int nb = 0; nb < n_blocks; ++nb)
    count += attention_tile_kind<false>(p, b, m0, m1, nb * kBlockN, min(nb * kBlockN + kBlockN, p.T)) != kTileEmpty;
  return count;
}

// Counts a key block's completed add into a tile in; returns 0 if others are still to come, 1 if
// this was the last and the tile is in range, 2 if the last and out of range. One thread calls it,
// after its bulk add has completed (bulk_wait): the proxy fence orders those async-proxy writes
// before the release, and the acquire makes every other block's visible to the last one.
__device__ __forceinline__ int dq_tile_count_in(int* counter, bool overflow, int contributors) {
  fence_proxy_async_global();
  const int old = atom_add_acq_rel_gpu(counter, 1 + (overflow ? kDqTileOverflowUnit : 0));
  if ((old & kDqTileCountMask) + 1 != contributors) return 0;
  return (overflow || old >= kDqTileOverflowUnit) ? 2 : 1;
}

// Writes dQ rows [row0, row0 + 64) of (b, h) (rows past T skipped) from the tile's words: kThreads
// threads (t = 0 .. kThreads - 1), each 8 columns of a row at a time (two 32-byte runs of words, one
// 16-byte store). Then, after `sync` (a barrier of the kThreads), they drop the tile's lines from L2.
template <int kHeadDim, bool kBF16, int kThreads, class Sync>
__device__ __forceinline__ void dq_tile_convert(const AttentionParams& p, unsigned long long* tile_words, int b,
                                                int h, int row0, bool overflow, int t, Sync sync) {
  constexpr int kN8 = kHeadDim / 8;
  constexpr int kPieces = kDqTileRows * kN8;
  const double unit = static_cast<double>(p.softmax_scale) / static_cast<double>(1ull << kDqFixedFracBits);
  uint16_t* dq = static_cast<uint16_t*>(p.dq) + b * p.dq_batch_stride + h * p.dq_head_stride;
#pragma unroll 1
  for (int g = t; g < kPieces; g += kThreads) {
    const int r = g / kN8, n8 = g % kN8;
    if (row0 + r >= p.T) continue;
    // Row r of 16 x 8 tile (r / 16, n8): lanes 4 (r % 8) .. + 3 hold it, in elements e0 (even
    // columns) and e0 + 1 (odd) with e0 = 2 ((r / 8) % 2) (flash_dq_accum.cuh).
    const unsigned long long* w = tile_words + ((r / 16) * kN8 + n8) * 128 + 4 * (r % 8) + 32 * (2 * ((r / 8) % 2));
    const ulonglong2 e0a = *reinterpret_cast<const ulonglong2*>(w), e0b = *reinterpret_cast<const ulonglong2*>(w + 2);
    const ulonglong2 e1a = *reinterpret_cast<const ulonglong2*>(w + 32),
                     e1b = *reinterpret_cast<const ulonglong2*>(w + 34);
    const unsigned long long even[4] = {e0a.x, e0a.y, e0b.x, e0b.y}, odd[4] = {e1a.x, e1a.y, e1b.x, e1b.y};
    auto value = [&](unsigned long long word) {
      return overflow ? NAN : static_cast<float>(static_cast<double>(static_cast<long long>(word)) * unit);
    };
    uint32_t out[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) out[c] = pack2<kBF16>(value(even[c]), value(odd[c]));
    *reinterpret_cast<uint4*>(dq + static_cast<int64_t>(row0 + r) * p.dq_row_stride + 8 * n8) =
        make_uint4(out[0], out[1], out[2], out[3]);
  }
  sync();  // every thread's reads are done
  constexpr int kLines = kDqTileRows * kHeadDim * 8 / 128;
  for (int i = t; i < kLines; i += kThreads) discard_l2_line(tile_words + 16 * i);
}

}  // namespace ft::cuda::flash
