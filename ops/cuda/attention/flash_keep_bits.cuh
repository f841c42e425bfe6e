// The forward's store and the backward's load of stored dropout keep bits (layout:
// ops/attention_keep_bits.h).
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

// The backward: transposed_tile_keep_bits's word (bit 4 nb + e = element [nb][e] of the warp's 16
// keys from key0 x kBlockM queries from m0), loaded instead of drawn. Tiles not stored (past T, or
// above a causal diagonal) are wholly masked: their bits are 0.
template <int kBlockM>
__device__ __forceinline__ uint32_t load_transposed_keep_bits(const AttentionParams& p, int bh, int m0, int key0,
                                                              int lane) {
  static_assert(kBlockM % 16 == 0 && kBlockM / 2 <= 32, "keep-bit layout: one word per 16 keys");
  const int k = key0 >> 4;
  const uint8_t* slice =
      p.keep_bits + bh * keep_tiles_per_slice(p.T, p.causal) * kKeepTileBytes + keep_pair_of_backward_lane(lane);
  uint32_t keep = 0;
#pragma unroll
  for (int i = 0; i < kBlockM / 16; ++i) {  // query tile i: bits 8 i .. 8 i + 7 (elements [2 i + h][e])
    const int q = (m0 >> 4) + i;
    if (!keep_tile_stored(p.T, p.causal, k, q)) continue;
    const uint32_t pair =
        *reinterpret_cast<const uint16_t*>(slice + keep_tile_index(p.T, p.causal, k, q) * kKeepTileBytes);
    keep |= transposed_keep_byte(pair, lane) << (8 * i);
  }
  return keep;
}

}  // namespace ft::cuda::flash
