// CUDA launchers of the reduce family. Buffers are contiguous, viewed as (outer, r, inner) and
// reduced over r.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

// Columns per block of the inner > 1 kernel (one thread per column, kReduceRowsPerBlock rows
// in flight).
constexpr int64_t kReduceColsPerBlock = 32;
constexpr int64_t kReduceRowsPerBlock = 8;

// How many slices the reduced axis is cut into when inner > 1, so that a bias gradient
// ((16384, 768) over axis 0: 24 column tiles) still fills the GPU. A function of the shape
// alone, so the summation order -- and the result -- never depend on the card.
inline int reduce_column_splits(int64_t outer, int64_t r, int64_t inner) {
  constexpr int64_t kTargetBlocks = 1024;
  const int64_t tiles = outer * ((inner + kReduceColsPerBlock - 1) / kReduceColsPerBlock);
  const int64_t wanted = (kTargetBlocks + tiles - 1) / tiles;
  const int64_t most = std::max<int64_t>(1, r / 64);  // each slice keeps >= 64 rows of work
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, std::min<int64_t>(most, 65535)));
}

struct ReduceParams {
  const void* x = nullptr;  // (outer, r, inner)
  void* y = nullptr;        // (outer, inner)
  float* partial = nullptr; // (splits, outer, inner) fp32 workspace, needed when splits > 1
  DType dtype = DType::F32;
  int64_t outer = 1, r = 1, inner = 1;
  int splits = 1;  // reduce_column_splits(outer, r, inner) when inner > 1, else 1
  float scale = 1.f;
};

struct ReduceBackwardParams {
  const void* dy = nullptr;  // (outer, inner)
  void* dx = nullptr;        // (outer, r, inner)
  DType dtype = DType::F32;
  int64_t outer = 1, r = 1, inner = 1;
  float scale = 1.f;
};

// Slices of the rows in sum_rows_into (a function of the shape alone, like reduce_column_splits).
inline int sum_rows_splits(int64_t rows, int64_t cols) {
  constexpr int64_t kTargetBlocks = 1024, kColsPerBlock = 256;
  const int64_t tiles = (cols + kColsPerBlock - 1) / kColsPerBlock;
  const int64_t wanted = (kTargetBlocks + tiles - 1) / tiles;
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, std::clamp<int64_t>(rows / 32, 1, 65535)));
}

struct SumRowsIntoParams {
  const void* x = nullptr;   // (rows, cols), rows row_stride elements apart
  float* out = nullptr;      // (cols): += the column sums
  float* partial = nullptr;  // (splits, cols) fp32 workspace
  DType dtype = DType::BF16;
  int64_t rows = 0, cols = 0, row_stride = 0;
  int splits = 1;  // sum_rows_splits(rows, cols)
};

// out += sum over rows of x, in fp32: slices of rows summed per column, then the slices' sums in a
// fixed order (bitwise reproducible for a given shape).
FT_CUDA_LAUNCHER(void sum_rows_into(const SumRowsIntoParams& p, Stream stream));

// y = scale * sum over r of x, accumulated in fp32.
FT_CUDA_LAUNCHER(void reduce_sum(const ReduceParams& p, Stream stream));
// dx = scale * dy repeated along r.
FT_CUDA_LAUNCHER(void reduce_backward(const ReduceBackwardParams& p, Stream stream));

}  // namespace ft::cuda
