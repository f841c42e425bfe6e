// The layout of the backward's fp32 dQ accumulator (AttentionParams::dq_accum).
//
// dq_accum is the backward's own workspace: only the backward kernels add into it and only the
// convert kernel reads it, so it is laid out the way mma.sync accumulators come out rather than as
// (T, D) rows. Per batch * head, T is rounded up to kRowAlign rows; inside, 16-byte chunk
// ((m16 * D / 8 + n8) * 32 + lane) holds what lane `lane` accumulates for the 16 x 8 tile
// (rows 16 m16 .., columns 8 n8 ..) in C fragment order: rows r and r + 8, columns 2c and 2c + 1
// (r = lane / 4, c = lane % 4). So every lane adds one 16-byte chunk per 16 x 8 tile with one
// RED, and a warp's 32 chunks of a tile are 512 contiguous bytes, whatever the kernel's warp
// tiling. Rows past T exist and receive zeros.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft::cuda::flash {

// Rows per batch * head: T rounded up to the largest kBlockM of the kernels that add into it (also
// the workspace size the launcher asks for, flash_attention_backward_workspace).
constexpr int kDqAccumRowAlign = 128;
FT_HOST_DEVICE constexpr int64_t dq_accum_rows(int T) {
  return (static_cast<int64_t>(T) + kDqAccumRowAlign - 1) / kDqAccumRowAlign * kDqAccumRowAlign;
}

template <int kHeadDim>
struct DqAccumLayout {
  static constexpr int kRowAlign = kDqAccumRowAlign;
  static constexpr int kTilesD = kHeadDim / 8;

  FT_HOST_DEVICE static constexpr int64_t rows(int T) { return dq_accum_rows(T); }
  // Float offset (within one batch * head) of the chunk of 16 x 8 tile (m16, n8) held by `lane`.
  FT_HOST_DEVICE static constexpr int64_t chunk(int m16, int n8, int lane) {
    return ((static_cast<int64_t>(m16) * kTilesD + n8) * 32 + lane) * 4;
  }
  // Row and column of float 0 of chunk number `index` (= chunk() / 4); float 1 is the next column,
  // floats 2 and 3 the same columns 8 rows further.
  FT_HOST_DEVICE static constexpr int row_of(int64_t index) {
    return static_cast<int>(index / (32 * kTilesD)) * 16 + static_cast<int>(index % 32) / 4;
  }
  FT_HOST_DEVICE static constexpr int col_of(int64_t index) {
    return static_cast<int>((index / 32) % kTilesD) * 8 + 2 * static_cast<int>(index % 4);
  }
};

}  // namespace ft::cuda::flash
