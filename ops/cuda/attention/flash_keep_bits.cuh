// The forward's store and the backward's load of stored dropout keep bits (layout:
// ops/attention_keep_bits.h).
#pragma once

#include "core/dropout_mask.h"
#include "ops/attention_keep_bits.h"
#include "ops/attention_params.h"

namespace ft::cuda::flash {

// The forward: this lane's byte of the 16 x 16 tile at (query row0, key col0) (both multiples of
// 16), from the tile's Philox words (dropout_tile_bits: word 2 h + t, halves e), written when the
// tile is stored (inside the sequence; causal: on or below the diagonal).
__device__ __forceinline__ void store_keep_byte(const AttentionParams& p, int bh, int row0, int col0, int lane,
                                                const PhiloxBits& w, uint32_t bound) {
  const int k = col0 >> 4, q = row0 >> 4;
  if (q >= keep_key_tiles(p.T) || !keep_block_stored(p.T, p.causal, k, q >> 2) || (p.causal && q < k)) return;
  uint32_t byte = 0;
#pragma unroll
  for (int wd = 0; wd < 4; ++wd) {  // wd = 2 h + t: bits 4 h + 2 t (+ 1)
    byte |= static_cast<uint32_t>(dropout_keep_lo(w.v[wd], bound)) << (2 * wd);
    byte |= static_cast<uint32_t>(dropout_keep_hi(w.v[wd], bound)) << (2 * wd + 1);
  }
  const int64_t block = bh * keep_blocks_per_slice(p.T, p.causal) + keep_block_index(p.T, p.causal, k, q >> 2);
  p.keep_bits[block * kKeepBlockBytes + keep_byte_of_forward_lane(lane, q & 3)] = static_cast<uint8_t>(byte);
}

// The backward: this lane's eight bytes of the block of 16 keys from key0 x 64 queries from m0 (0
// where the block is not stored: wholly masked). Issued a tile ahead of its use (the load's latency
// then hides under a tile's work); tiles of the block above a causal diagonal hold stale bytes,
// which is harmless: every element there is masked, so P is 0 whatever Z says.
__device__ __forceinline__ uint64_t load_keep_block(const AttentionParams& p, int bh, int m0, int key0, int lane) {
  const int k = key0 >> 4, Q = m0 >> 6;
  if (!keep_block_stored(p.T, p.causal, k, Q)) return 0;
  const int64_t block = bh * keep_blocks_per_slice(p.T, p.causal) + keep_block_index(p.T, p.causal, k, Q);
  return *reinterpret_cast<const uint64_t*>(p.keep_bits + block * kKeepBlockBytes + keep_bytes_of_backward_lane(lane));
}

// transposed_tile_keep_bits's word (bit 4 nb + e = element [nb][e] of the warp's 16 keys x 64
// queries) from the lane's eight bytes.
__device__ __forceinline__ uint32_t decode_keep_block(uint64_t bytes, int lane) {
  uint32_t keep = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    keep |= transposed_keep_byte(static_cast<uint32_t>(bytes >> (16 * i)) & 0xFFFFu, lane) << (8 * i);
  return keep;
}

}  // namespace ft::cuda::flash
