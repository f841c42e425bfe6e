// Writing and reading the stored dropout keep bits (layout: flash_keep_mask.h).
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_keep_mask.h"

namespace ft::cuda::flash {

// The forward: one warp's 16 query rows [row0, row0 + 16) x kPieces * 16 keys from key0 (both
// 16-aligned, inside one 128-key block), given the Philox words its lanes drew for them
// (dropout_tile_bits: words[i] covers keys key0 + 16 i ..). Lane (r, c) = (lane / 4, lane % 4)
// holds rows r, r + 8 and keys 2c + e, 8 + 2c + e of each piece, so its elements with e = r % 2
// belong to word lane 4 (2c + r % 2) + r / 2 and those with e = 1 - r % 2 to the word of its
// partner lane ^ 4 (the other row parity, the same c): a lane forms both bytes, keeps one, and
// swaps the other in one shuffle per four pieces.
template <int kPieces>
__device__ __forceinline__ void store_keep_mask_slab(const AttentionParams& p, int bh, int row0, int key0,
                                                     const PhiloxBits (&words)[kPieces], uint32_t bound, int lane) {
  static_assert(kPieces >= 1 && kPieces <= kKeepMaskKeys / 16, "one 128-key block");
  const int m = row0 / kKeepMaskQueries, n = key0 / kKeepMaskKeys;
  if (!keep_mask_has_block(p.T, p.causal, m, n)) return;  // rows past T of a 128-row tile
  const int par = (lane >> 2) & 1;
  uint32_t own[(kPieces + 3) / 4] = {}, give[(kPieces + 3) / 4] = {};
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    uint32_t nib[2] = {0u, 0u};  // e = 0, 1: bit 4 h + 2 t of (row r + 8 h, key 8 t + 2c + e)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const uint32_t word = words[i].v[2 * h + t];
        nib[0] |= static_cast<uint32_t>(dropout_keep_lo(word, bound)) << (4 * h + 2 * t);
        nib[1] |= static_cast<uint32_t>(dropout_keep_hi(word, bound)) << (4 * h + 2 * t);
      }
    own[i / 4] |= ((par ? nib[1] : nib[0]) << par) << (8 * (i % 4));
    give[i / 4] |= ((par ? nib[0] : nib[1]) << par) << (8 * (i % 4));
  }
#pragma unroll
  for (int j = 0; j < (kPieces + 3) / 4; ++j) own[j] |= __shfl_xor_sync(0xffffffffu, give[j], 4);
  const int word_lane = 4 * (2 * (lane & 3) + par) + (lane >> 3);
  uint8_t* out = p.keep_mask + keep_mask_block_offset(p.T, p.causal, bh, m, n) + 4 * word_lane +
                 (row0 % kKeepMaskQueries) / 16;
  const int w0 = (key0 % kKeepMaskKeys) / 16;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) out[128 * (w0 + i)] = static_cast<uint8_t>(own[i / 4] >> (8 * (i % 4)));
}

// The backward: lane `lane`'s keep bits of key group w (keys 128 n + 16 w ..) and the 64 queries of
// block row m, as transposed_tile_keep_bits<64> returns them. Only for a group with a visible key
// in those queries: the forward writes the groups of the tiles it visits.
__device__ __forceinline__ uint32_t load_keep_mask_word(const AttentionParams& p, int bh, int m, int n, int w,
                                                       int lane) {
  const uint8_t* block = p.keep_mask + keep_mask_block_offset(p.T, p.causal, bh, m, n);
  return __ldg(reinterpret_cast<const uint32_t*>(block) + 32 * w + lane);
}

}  // namespace ft::cuda::flash
