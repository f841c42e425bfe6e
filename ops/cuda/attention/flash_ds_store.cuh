// The layout of the stored dS (the deterministic backward's kStoredDs form, flash_attention.h).
//
// cuDNN's backward (what llm.c runs) does not accumulate dQ inside its main kernel: it writes dS and
// computes dQ = dS K afterwards with a separate product (session 24, bench/results/llmc-vs-ours-h100.md).
// Done that way dQ is deterministic for free: each dQ row is one CTA's sum over its key blocks in a
// fixed order, with no atomics, no fixed-point words to zero and convert, and no order counters.
// Here the warp-specialised backward (flash_bwd_ws_kernel.cuh) already stages each tile's dS^T in
// shared memory for its dQ product; with kStoredDs it copies the tile out instead (one bulk store per
// consumer) and flash_bwd_ds_dq_kernel.cuh forms dQ.
//
// A tile is 128 keys (one backward CTA) x 64 queries (one query tile), dS^T as the backward holds
// it: rows = keys, 64 queries (128 bytes) a row, 128-byte swizzled (flash_wgmma.cuh's sw128), so
// the dQ kernel copies it back into shared memory byte for byte and feeds it to wgmma as it is.
// Per batch * head the tiles of query tile m are [before(m), before(m) + slots(m)), key block n at
// before(m) + n. Causal rows keep only the key blocks a causal tile can see (n <= m / 2: keys
// 128 n <= queries 64 m + 63), a little over half of the full grid; tiles the mask leaves empty
// (causal corners, block-sparse holes) keep their slot but are never written or read.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft::cuda::flash {

constexpr int kDsTileQueries = 64, kDsTileKeys = 128;
constexpr int kDsTileBytes = kDsTileQueries * kDsTileKeys * 2;  // 16-bit elements

FT_HOST_DEVICE constexpr int ds_query_tiles(int T) { return (T + kDsTileQueries - 1) / kDsTileQueries; }
FT_HOST_DEVICE constexpr int ds_key_blocks(int T) { return (T + kDsTileKeys - 1) / kDsTileKeys; }
// Tiles before query tile m: causal, slots(i) = i / 2 + 1 (at most ds_key_blocks: 128 (i / 2) <=
// 64 i < T), so the sum over i < m is k (k + 1) for m = 2 k and (k + 1)^2 for m = 2 k + 1.
FT_HOST_DEVICE constexpr int64_t ds_tiles_before(int m, int T, bool causal) {
  if (!causal) return static_cast<int64_t>(m) * ds_key_blocks(T);
  const int64_t k = m / 2;
  return m % 2 == 0 ? k * (k + 1) : (k + 1) * (k + 1);
}
FT_HOST_DEVICE constexpr int64_t ds_tiles_per_head(int T, bool causal) {
  return ds_tiles_before(ds_query_tiles(T), T, causal);
}
// Byte offset of tile (m, n) of batch * head bh.
FT_HOST_DEVICE constexpr int64_t ds_tile_offset(int64_t bh, int m, int n, int T, bool causal) {
  return (bh * ds_tiles_per_head(T, causal) + ds_tiles_before(m, T, causal) + n) * kDsTileBytes;
}
// The workspace in floats (AttentionParams::dq_accum holds it).
FT_HOST_DEVICE constexpr int64_t ds_store_float_count(int64_t bh, int T, bool causal) {
  return bh * ds_tiles_per_head(T, causal) * (kDsTileBytes / 4);
}

}  // namespace ft::cuda::flash
