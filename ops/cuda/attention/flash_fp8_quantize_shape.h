// Work split of the FP8 quantiser (flash_fp8_quantize_kernel.cuh): one CTA per tile image, each
// thread holding kRows rows x 8 columns of its tile (one 16-byte bf16 load per row). Host and
// device code, so a CPU test can check that the threads cover every element of a tile once.
//
// Q, K (row images, optional Hadamard rotation along D): a row's D / 8 loads sit in consecutive
// lanes, 32 / (D / 8) rows per warp instruction, so a row's butterflies stay inside one warp.
// V (V^T image, keys along the bytes): a warp covers 16 keys x 64 columns per 4 rows of kRows; lane
// 8 q + j holds keys k0, k0 + 1, k0 + 8, k0 + 9 (k0 = 16 g + 2 q) of columns 8 j .. 8 j + 7, the
// four keys that fp8_pv_slot puts into one 32-bit word of a V^T row (slots 16 g + 4 q + 0..3), so
// the kernel writes whole words; the 8 lanes j of one q write rows 8 j + e of the same word column,
// which the kernel spreads over the banks by starting each lane at a different e.
#pragma once

#include "core/macros.h"
#include "ops/attention_fp8_params.h"

namespace ft::cuda::flash {

template <int D, Fp8Operand kOperand>
struct Fp8QuantShape {
  static_assert(D == 64 || D == 128 || D == 256, "FP8 head dims");
  static constexpr int kTileRows = kOperand == Fp8Operand::kQ ? kFp8QTileRows : kFp8KvTileRows;
  static constexpr int kCols = 8;                 // columns per row load: 16 bytes of bf16
  static constexpr int kRows = D == 256 ? 8 : 4;  // rows per thread: a multiple of V's 4-key words
  static constexpr int kThreads = kTileRows * D / (kCols * kRows);
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kImageBytes = kTileRows * D;
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "quantiser CTA");

  // Row (within the tile: the key for V) and first column of the i-th row load of thread `thread`.
  FT_HOST_DEVICE static void place(int thread, int i, int& row, int& col) {
    const int warp = thread / 32, lane = thread % 32;
    if constexpr (kOperand == Fp8Operand::kV) {
      constexpr int kColBlocks = D / 64;
      const int unit = warp * (kRows / 4) + i / 4;  // (16-key group, 64-column block)
      const int group = unit / kColBlocks, block = unit % kColBlocks, q = lane / 8, j = lane % 8, r = i % 4;
      row = 16 * group + 2 * q + (r & 1) + 8 * (r >> 1);
      col = 64 * block + 8 * j;
    } else {
      constexpr int kLanesPerRow = D / kCols, kRowsPerLoad = 32 / kLanesPerRow;
      row = (warp * kRows + i) * kRowsPerLoad + lane / kLanesPerRow;
      col = kCols * (lane % kLanesPerRow);
    }
  }
};

}  // namespace ft::cuda::flash
