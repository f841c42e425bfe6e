// Writing and reading the stored dropout keep bits (layout: flash_keep_mask.h).
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_keep_mask.h"

namespace ft::cuda::flash {

// The forward: a lane's keep bits of one warp's 16 query rows [row0, row0 + 16) x kPieces * 16 keys
// from key0 (both 16-aligned, inside one 128-key block), packed while the kernel applies them: lane
// (r, c) = (lane / 4, lane % 4) holds rows r, r + 8 (h = 0, 1) and keys 16 i + 8 t + 2c + e of piece
// i, and bit(i, h, t) of its word e (one per four pieces) is that element's keep bit.
template <int kPieces>
struct KeepMaskBytes {
  static_assert(kPieces >= 1 && kPieces <= kKeepMaskKeys / 16, "one 128-key block");
  static constexpr int kWords = (kPieces + 3) / 4;
  static __device__ __forceinline__ int bit(int piece, int h, int t) { return 8 * (piece % 4) + 4 * h + 2 * t; }
};

// ... and writes them (flash_keep_mask.h). The lane's elements with e = r % 2 belong to word lane
// 4 (2c + r % 2) + r / 2, those with e = 1 - r % 2 to the word of its partner lane ^ 4 (the other row
// parity, the same c): a lane keeps one e-word, shifted to its row parity's bits, and swaps the other
// in one shuffle per four pieces. Call it from every lane of the warp.
template <int kPieces>
__device__ __forceinline__ void store_keep_mask_bytes(const AttentionParams& p, int bh, int row0, int key0,
                                                      const uint32_t (&keep_e)[2][KeepMaskBytes<kPieces>::kWords],
                                                      int lane) {
  const int m = row0 / kKeepMaskQueries, n = key0 / kKeepMaskKeys;
  if (!keep_mask_has_block(p.T, p.causal, m, n)) return;  // rows past T of a 128-row tile (warp-uniform)
  const int par = (lane >> 2) & 1;
  const int word_lane = 4 * (2 * (lane & 3) + par) + (lane >> 3);
  uint8_t* out = p.keep_mask + keep_mask_block_offset(p.T, p.causal, bh, m, n) + 4 * word_lane +
                 (row0 % kKeepMaskQueries) / 16;
  const int w0 = (key0 % kKeepMaskKeys) / 16;
#pragma unroll
  for (int j = 0; j < KeepMaskBytes<kPieces>::kWords; ++j) {
    const uint32_t own = (par ? keep_e[1][j] : keep_e[0][j]) << par;
    const uint32_t give = (par ? keep_e[0][j] : keep_e[1][j]) << par;
    const uint32_t word = own | __shfl_xor_sync(0xffffffffu, give, 4);
#pragma unroll
    for (int i = 4 * j; i < kPieces && i < 4 * j + 4; ++i)
      out[128 * (w0 + i)] = static_cast<uint8_t>(word >> (8 * (i % 4)));
  }
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
