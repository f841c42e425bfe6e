// The dropout keep bits of a flash forward, stored for its backward (host and device code).
//
// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh) draws the mask again otherwise, four
// Philox calls a lane and tile. So where that backward runs, the forward (the wgmma kernel: the one
// that takes dropout on sm_90a) writes the bits it draws anyway, one bit an element, and the
// backward loads one 32-bit word a lane and tile. The mask is still dropout_mask.h's: only where the
// backward gets it changes. H200, ncu, us, causal, B T = 32768, p = 0.1, stored / drawn (session 35,
// bench/attention/NOTES.md): ws backward D = 128 T = 4096 1533 / 1827 (atomic dQ), 1075 / 1466
// (stored dS), D = 64 2146 / 2486 (T = 4096), 582 / 695 (T = 1024, ordered dQ); the forward pays
// for writing them, 18-25% (D = 128 T = 4096 1290 / 1093), so forward + backward gain 1-7% and
// D = 64's atomic form at T = 4096 is level (3923 / 3903). The forward's packing is what to make
// cheaper next.
//
// Layout, per (batch, head) slice: blocks of 64 queries x 128 keys, 1 KiB each; block
// (m = q / 64, n = k / 128). Causal calls store only the blocks a causal tile sees (n <= m / 2,
// that is 128 n <= 64 m + 63), row of blocks after row, so they take about half. Inside a block,
// byte 4 (32 w + l) + s holds, of key group w = (k % 128) / 16, lane l = 4 (k % 8) + (q % 8) / 2
// and query slab s = (q % 64) / 16, bit 4 ((q / 8) % 2) + 2 ((k / 8) % 2) + q % 2.
// Why that order: the 32-bit word (w, l) is what lane l of the backward warp with keys
// 16 w .. 16 w + 15 needs of a 64-query tile (its transposed accumulator: bit 4 nb + e of element
// [nb][e], flash_tile.cuh's transposed_tile_keep_bits), so it loads one word. The forward warp of
// query slab s writes byte s of each word, from the Philox pieces its lanes hold, with one exchange
// between lanes l and l ^ 4 (flash_keep_mask.cuh).
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft::cuda::flash {

inline constexpr int kKeepMaskQueries = 64, kKeepMaskKeys = 128, kKeepMaskBlockBytes = 1024;

// Causal blocks of the rows of blocks before row m: sum over i < m of (i / 2 + 1).
FT_HOST_DEVICE int64_t keep_mask_causal_blocks_before(int64_t m) {
  const int64_t a = m / 2;
  return m % 2 == 0 ? a * (a + 1) : (a + 1) * (a + 1);
}

FT_HOST_DEVICE int64_t keep_mask_slice_blocks(int T, bool causal) {
  const int64_t rows = (T + kKeepMaskQueries - 1) / kKeepMaskQueries, cols = (T + kKeepMaskKeys - 1) / kKeepMaskKeys;
  return causal ? keep_mask_causal_blocks_before(rows) : rows * cols;
}

FT_HOST_DEVICE int64_t keep_mask_bytes(int64_t slices, int T, bool causal) {
  return slices * keep_mask_slice_blocks(T, causal) * kKeepMaskBlockBytes;
}

// Whether block (m, n) is stored (inside T; causal: one a causal tile sees).
FT_HOST_DEVICE bool keep_mask_has_block(int T, bool causal, int m, int n) {
  return m >= 0 && n >= 0 && m * kKeepMaskQueries < T && n * kKeepMaskKeys < T && (!causal || n <= m / 2);
}

// Byte offset of block (m, n) of `slice` (keep_mask_has_block must hold).
FT_HOST_DEVICE int64_t keep_mask_block_offset(int T, bool causal, int64_t slice, int m, int n) {
  const int64_t cols = (T + kKeepMaskKeys - 1) / kKeepMaskKeys;
  const int64_t in_slice = causal ? keep_mask_causal_blocks_before(m) + n : m * cols + n;
  return (slice * keep_mask_slice_blocks(T, causal) + in_slice) * kKeepMaskBlockBytes;
}

// Where the bit of (q, k) of `slice` is (its block must be stored).
struct KeepMaskBit {
  int64_t byte;
  int bit;
};
FT_HOST_DEVICE KeepMaskBit keep_mask_bit(int T, bool causal, int64_t slice, int q, int k) {
  const int w = (k % kKeepMaskKeys) / 16, lane = 4 * (k % 8) + (q % 8) / 2, s = (q % kKeepMaskQueries) / 16;
  const int64_t block = keep_mask_block_offset(T, causal, slice, q / kKeepMaskQueries, k / kKeepMaskKeys);
  return {block + 4 * (32 * w + lane) + s, 4 * ((q / 8) % 2) + 2 * ((k / 8) % 2) + q % 2};
}

}  // namespace ft::cuda::flash
