// The layout of the backward's fp32 dQ accumulator (AttentionParams::dq_accum).
//
// dq_accum is the backward's own workspace: only its main kernel adds into it and only the convert
// kernel reads it, so it is laid out the way the main kernel's dQ phase produces it rather than as
// (T, D) rows. Per (batch * head, tile of kRows queries) one block of kRows x D floats; inside it,
// the 16-byte chunk ((warp * kNTilesD + dj) * 32 + lane) holds what lane `lane` of warp `warp`
// accumulated for n8 tile dj of its dQ sub-tile (mma C fragment order): rows r and r + 8, columns
// 2c and 2c + 1 (r = lane / 4, c = lane % 4), rows and columns relative to the warp's sub-tile
// (warps tile the kRows x D block as 2 x 2: warp w owns rows 16 (w % 2), columns (D / 2) (w / 2)).
// So a warp's chunks are 512 contiguous bytes per dj: one 16-byte reduction per lane and n8 tile
// instead of two 8-byte ones, and the whole tile can be staged in shared memory without bank
// conflicts and added with one bulk copy (cp.reduce.async.bulk). Rows past T of the last tile
// exist (the size is rounded up to whole tiles) and receive zeros.
#pragma once

#include <cstdint>

#include "ops/cuda/attention/flash_attention.h"

namespace ft::cuda::flash {

template <int kHeadDim>
struct DqAccumLayout {
  static constexpr int kRows = kFlashDqTileRows;  // = the backward's kBlockM (static_asserted)
  static constexpr int kWarps = 4;  // 2 (rows) x 2 (columns)
  static constexpr int kCols = kHeadDim / 2;  // columns of one warp's sub-tile
  static constexpr int kNTilesD = kCols / 8;  // n8 tiles per warp
  static constexpr int kTileFloats = kRows * kHeadDim;

  // Float offset of a chunk inside its tile.
  __host__ __device__ static constexpr int chunk(int warp, int dj, int lane) {
    return ((warp * kNTilesD + dj) * 32 + lane) * 4;
  }
  // Row (of the tile) and column of float 0 of chunk `chunk_index` (= chunk() / 4); float 1 is the
  // next column, floats 2 and 3 the same columns 8 rows further.
  __host__ __device__ static constexpr int row_of(int chunk_index) {
    return 16 * ((chunk_index / (32 * kNTilesD)) % 2) + (chunk_index % 32) / 4;
  }
  __host__ __device__ static constexpr int col_of(int chunk_index) {
    return kCols * (chunk_index / (32 * kNTilesD) / 2) + 8 * ((chunk_index / 32) % kNTilesD) +
           2 * (chunk_index % 4);
  }
};

}  // namespace ft::cuda::flash
