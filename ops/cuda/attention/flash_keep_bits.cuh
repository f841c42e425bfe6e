// The forward's store and the backward's load of stored dropout keep bits (layout:
// ops/attention_keep_bits.h).
//
// v3 (session 21): v1's layout, in which a warp's 32 bytes of a 16 x 16 tile are contiguous, so that
// every forward store instruction writes a whole 32-byte sector (v2's interleaved blocks made each one
// write parts of four sectors: +2.8 ms a GPT-2-small step at T = 4096), with v2's loads a tile ahead
// (v1 consumed them as it issued them; v1 was +4.1 ms in all, its stores' share not measured).
#pragma once

#include "core/dropout_mask.h"
#include "ops/attention_keep_bits.h"
#include "ops/attention_params.h"

namespace ft::cuda::flash {

// The forward: this lane's byte of the 16 x 16 tile at (query row0, key col0) (both multiples of
// 16), from the tile's Philox words (dropout_tile_bits: word 2 h + t, halves e), written when the
// tile is stored.
__device__ __forceinline__ void store_keep_byte(const AttentionParams& p, int bh, int row0, int col0, int lane,
                                                const PhiloxBits& w, uint32_t bound) {
  const int k = col0 >> 4, q = row0 >> 4;
  if (!keep_tile_stored(p.T, p.causal, k, q)) return;
  uint32_t byte = 0;
#pragma unroll
  for (int wd = 0; wd < 4; ++wd) {  // wd = 2 h + t: bits 4 h + 2 t (+ 1)
    byte |= static_cast<uint32_t>(dropout_keep_lo(w.v[wd], bound)) << (2 * wd);
    byte |= static_cast<uint32_t>(dropout_keep_hi(w.v[wd], bound)) << (2 * wd + 1);
  }
  const int64_t tile = bh * keep_tiles_per_slice(p.T, p.causal) + keep_tile_index(p.T, p.causal, k, q);
  p.keep_bits[tile * kKeepTileBytes + keep_byte_of_forward_lane(lane)] = static_cast<uint8_t>(byte);
}

// The backward: this lane's byte pairs of the four tiles of 16 keys from key0 x 64 queries from m0,
// pair i in bits 16 i .. 16 i + 15 (0 for a tile not stored: past T or above a causal diagonal,
// wholly masked). Issued a tile ahead of its use, so that the loads' latency hides under a tile's work.
__device__ __forceinline__ uint64_t load_keep_block(const AttentionParams& p, int bh, int m0, int key0, int lane) {
  const int k = key0 >> 4;
  const uint8_t* slice =
      p.keep_bits + bh * keep_tiles_per_slice(p.T, p.causal) * kKeepTileBytes + keep_pair_of_backward_lane(lane);
  uint64_t pairs = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int q = (m0 >> 4) + i;
    if (!keep_tile_stored(p.T, p.causal, k, q)) continue;
    const uint64_t pair =
        *reinterpret_cast<const uint16_t*>(slice + keep_tile_index(p.T, p.causal, k, q) * kKeepTileBytes);
    pairs |= pair << (16 * i);
  }
  return pairs;
}

// transposed_tile_keep_bits's word (bit 4 nb + e = element [nb][e] of the warp's 16 keys x 64
// queries) from the lane's four pairs.
__device__ __forceinline__ uint32_t decode_keep_block(uint64_t pairs, int lane) {
  uint32_t keep = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    keep |= transposed_keep_byte(static_cast<uint32_t>(pairs >> (16 * i)) & 0xFFFFu, lane) << (8 * i);
  return keep;
}

}  // namespace ft::cuda::flash
