// Where the flash forward stores its dropout keep bits for the backward (AttentionParams::keep_bits).
//
// Why: the backward otherwise draws the forward's Philox numbers again (dropout_mask.h), four
// Philox4x32-10 calls per lane for every 16 keys x 64 queries it visits; at D = 64 that is a large
// share of its integer work (bench/train/NOTES.md, sessions 20-21). Loading one bit per element
// instead costs 1/8 byte of memory per score: 50 MB a layer for GPT-2-small at T = 4096, B = 4.
//
// Layout (v2): one bit per (query, key) element, in blocks of 16 keys x 64 queries (128 bytes),
// [slice][key tile k][query block Q], slice = b * H + h as the Philox slice. Causal calls store
// only the blocks that reach the diagonal (4 Q + 3 >= k). A block holds four 16 x 16 tiles i =
// q % 4; inside tile i, the forward's lane 4 r + c (rows r, r + 8; keys 2c, 2c + 1, 2c + 8, 2c + 9:
// dropout_mask.h's accumulator fragment) owns byte b = 8 (r / 2) + 2 c + r % 2 of the tile, stored at
// 8 (b / 2) + 2 i + b % 2 of the block, its bit 4 h + 2 t + e being row r + 8 h, key 8 t + 2 c + e.
// The point of that order: the backward's lane (r, c), which holds keys r and r + 8 of queries 2 c
// and 2 c + 1 of each eight (the transposed tile), finds its bits of all four tiles in the eight
// bytes at 8 (4 c + r / 2): one 64-bit load per lane and block (flash_keep_bits.cuh).
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft {

constexpr int kKeepBlockBytes = 128;  // 16 keys x 64 queries, one bit an element

// Key tiles (16 keys) and query blocks (64 queries).
FT_HOST_DEVICE int keep_key_tiles(int T) { return (T + 15) / 16; }
FT_HOST_DEVICE int keep_query_blocks(int T) { return (T + 63) / 64; }

// Blocks stored per slice.
FT_HOST_DEVICE int64_t keep_blocks_per_slice(int T, bool causal) {
  const int64_t nk = keep_key_tiles(T), nq = keep_query_blocks(T);
  if (!causal) return nk * nq;
  // Key tile k stores query blocks k / 4 .. nq - 1.
  int64_t n = 0;
  const int64_t a = nk / 4, rem = nk % 4;
  n = nk * nq - (2 * a * (a - 1) + a * rem);
  return n;
}

// Index of block (key tile k, query block Q) within its slice; causal calls need 4 Q + 3 >= k.
FT_HOST_DEVICE int64_t keep_block_index(int T, bool causal, int k, int Q) {
  const int64_t nq = keep_query_blocks(T);
  if (!causal) return static_cast<int64_t>(k) * nq + Q;
  const int64_t a = k / 4, rem = k % 4;
  return static_cast<int64_t>(k) * nq - (2 * a * (a - 1) + a * rem) + (Q - a);
}

// Whether block (k, Q) is stored: inside the sequence and, causal, reaching the diagonal.
FT_HOST_DEVICE bool keep_block_stored(int T, bool causal, int k, int Q) {
  return k < keep_key_tiles(T) && Q < keep_query_blocks(T) && (!causal || 4 * Q + 3 >= k);
}

// Inside a block. The forward's lane 4 r + c writes tile i's byte at 8 (b / 2) + 2 i + b % 2, b its
// byte of the tile, 8 (r / 2) + 2 c + r % 2.
FT_HOST_DEVICE int keep_byte_of_forward_lane(int lane, int tile) {
  const int r = lane >> 2, c = lane & 3, b = 8 * (r >> 1) + 2 * c + (r & 1);
  return 8 * (b >> 1) + 2 * tile + (b & 1);
}
// The backward's lane 4 r + c reads the eight bytes from 8 (4 c + r / 2): halfword i is tile i's pair.
FT_HOST_DEVICE int keep_bytes_of_backward_lane(int lane) { return 8 * (4 * (lane & 3) + ((lane >> 2) >> 1)); }
// ... and turns tile i's pair into its eight bits of that tile, bit 4 h + e = its element [h][e] of
// the transposed tile (query 8 h + 2 c + e % 2, key r + 8 (e / 2)). Byte e0 of the pair is the
// forward's query row 2 c + e0, whose bit 4 h + 2 t + r % 2 is query 8 h + 2 c + e0, key r + 8 t:
// shifted by r % 2, byte 0's bits 4 h + 2 t stay where they are and byte 1's (8 + 4 h + 2 t) move to
// 4 h + 2 t + 1.
FT_HOST_DEVICE uint32_t transposed_keep_byte(uint32_t pair, int lane) {
  const uint32_t x = pair >> ((lane >> 2) & 1);
  return (x & 0x55u) | ((x >> 7) & 0xAAu);
}

// Bytes of the whole buffer for B * H slices.
inline int64_t keep_bits_bytes(int64_t B, int64_t H, int T, bool causal) {
  return B * H * keep_blocks_per_slice(T, causal) * kKeepBlockBytes;
}

}  // namespace ft
