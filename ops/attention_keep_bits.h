// Where the flash forward stores its dropout keep bits for the backward (AttentionParams::keep_bits).
//
// Why: the backward otherwise draws the forward's Philox numbers again (dropout_mask.h), four
// Philox4x32-10 calls per lane for every 16 keys x 64 queries it visits; at D = 64 that is a large
// share of its integer work (bench/train/NOTES.md, sessions 20-21). Loading one bit per element
// instead costs 1/8 byte of memory per score: 50 MB a layer for GPT-2-small at T = 4096, B = 4.
//
// Layout: one bit per (query, key) element, in 16 x 16 tiles of 32 bytes, [slice][key tile][query
// tile], slice = b * H + h as the Philox slice. Causal calls store only the tiles on or below the
// diagonal (query tile >= key tile; the others are wholly masked), row k holding tiles k .. n - 1.
// Inside a tile, byte 8 (r / 2) + 2 c + r % 2 belongs to the forward's lane 4 r + c (its rows r and
// r + 8, its keys 2c, 2c + 1, 2c + 8, 2c + 9: dropout_mask.h's accumulator fragment), bit
// 4 h + 2 t + e of it to row r + 8 h, key 8 t + 2 c + e. The point of that order: the backward's lane
// (r, c), which holds keys r and r + 8 of queries 2 c and 2 c + 1 of each eight (the transposed tile),
// finds all of its bits of one tile in the two bytes at 8 c + 2 (r / 2) (flash_keep_bits.cuh).
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft {

constexpr int kKeepTileBytes = 32;  // a 16 x 16 tile, one bit an element

// Tiles a side: T rounded up to 16.
FT_HOST_DEVICE int keep_tiles_per_side(int T) { return (T + 15) / 16; }

// Tiles stored per slice.
FT_HOST_DEVICE int64_t keep_tiles_per_slice(int T, bool causal) {
  const int64_t n = keep_tiles_per_side(T);
  return causal ? n * (n + 1) / 2 : n * n;
}

// Index of tile (key tile k, query tile q) within its slice; causal calls need q >= k.
FT_HOST_DEVICE int64_t keep_tile_index(int T, bool causal, int k, int q) {
  const int64_t n = keep_tiles_per_side(T);
  return causal ? k * n - static_cast<int64_t>(k) * (k - 1) / 2 + (q - k) : k * n + q;
}

// Whether tile (k, q) is stored: inside the sequence and, causal, on or below the diagonal.
FT_HOST_DEVICE bool keep_tile_stored(int T, bool causal, int k, int q) {
  const int n = keep_tiles_per_side(T);
  return k < n && q < n && (!causal || q >= k);
}

// Inside a tile. The forward's lane 4 r + c writes byte 8 (r / 2) + 2 c + r % 2.
FT_HOST_DEVICE int keep_byte_of_forward_lane(int lane) {
  const int r = lane >> 2, c = lane & 3;
  return 8 * (r >> 1) + 2 * c + (r & 1);
}
// The backward's lane 4 r + c reads the two bytes from 8 c + 2 (r / 2) (an even offset).
FT_HOST_DEVICE int keep_pair_of_backward_lane(int lane) { return 8 * (lane & 3) + 2 * ((lane >> 2) >> 1); }
// ... and turns them into its eight bits of the tile, bit 4 h + e = its element [h][e] of the
// transposed tile (query 8 h + 2 c + e % 2, key r + 8 (e / 2)). Byte e0 of the pair is the forward's
// query row 2 c + e0, whose bit 4 h + 2 t + r % 2 is query 8 h + 2 c + e0, key r + 8 t: shifted by
// r % 2, byte 0's bits 4 h + 2 t stay where they are and byte 1's (8 + 4 h + 2 t) move to 4 h + 2 t + 1.
FT_HOST_DEVICE uint32_t transposed_keep_byte(uint32_t pair, int lane) {
  const uint32_t x = pair >> ((lane >> 2) & 1);
  return (x & 0x55u) | ((x >> 7) & 0xAAu);
}

// Bytes of the whole buffer for B * H slices.
inline int64_t keep_bits_bytes(int64_t B, int64_t H, int T, bool causal) {
  return B * H * keep_tiles_per_slice(T, causal) * kKeepTileBytes;
}

}  // namespace ft
