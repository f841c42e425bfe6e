// The second stage of the two-stage column sums: a (rows, cols) fp32 matrix of partial sums (one
// row per block or slice of rows of the first stage) summed over its rows, column by column, in a
// fixed order -- bitwise reproducible for a given number of rows. Serves sum_rows_into's bias
// gradients (ops/cuda/reduce.cu), the LayerNorm backward's weight and bias gradients
// (ops/cuda/layernorm_row.cuh) and the residual LayerNorm's branch-bias gradient with them.
#pragma once

#include <cstdint>

#include "core/cuda/check.h"
#include "core/stream.h"

namespace ft::cuda {

// Where the column sums go: a (rows, n C) partial matrix is n segments of C columns; column
// s C + c's total goes to out[s][c], added to what is there (add[s]: the trainer's fp32 gradient
// arena) or stored.
struct PartialSumsOut {
  float* out[3] = {nullptr, nullptr, nullptr};
  bool add[3] = {false, false, false};
  int64_t seg = 0;  // C
};

// A block of (kCols, kGroups) threads covers kCols columns: thread row y sums partial rows y,
// y + kGroups, ... (each step one coalesced load a warp, kGroups chains in flight a column), then
// the kGroups part sums are added in order through shared memory, and each column's total goes to
// its segment's output. One thread a column adding every partial row in turn took about 7 us for
// a 768-column bias gradient of 342 slices.
// (A template, so that the translation units including this header share one kernel.)
constexpr int kPartialCols = 32, kPartialGroups = 32;

template <int kCols, int kGroups>
__global__ void __launch_bounds__(kCols * kGroups)
    partial_sums_kernel(const float* partial, int rows, int64_t cols, PartialSumsOut o) {
  __shared__ float part[kGroups][kCols + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  float s = 0.f;
  if (c < cols) {
#pragma unroll 4
    for (int r = threadIdx.y; r < rows; r += kGroups) s += partial[static_cast<int64_t>(r) * cols + c];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols) return;
  float total = 0.f;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) total += part[g][threadIdx.x];
  const int64_t seg = c / o.seg;
  float* out = o.out[seg] + (c - seg * o.seg);
  *out = o.add[seg] ? *out + total : total;
}

// out's segments (+)= the column sums of partial (rows, n C), n = the segments named in out.
inline void sum_partial_rows_into(const float* partial, int rows, int n, const PartialSumsOut& out, Stream stream) {
  const int64_t cols = n * out.seg;
  partial_sums_kernel<kPartialCols, kPartialGroups>
      <<<static_cast<unsigned>((cols + kPartialCols - 1) / kPartialCols), dim3(kPartialCols, kPartialGroups), 0,
         stream>>>(partial, rows, cols, out);
  CUDA_CHECK_LAUNCH();
}

// out (cols) (+)= the column sums of partial (rows, cols).
inline void sum_partial_rows(const float* partial, int rows, int64_t cols, float* out, bool add, Stream stream) {
  PartialSumsOut o;
  o.out[0] = out;
  o.add[0] = add;
  o.seg = cols;
  sum_partial_rows_into(partial, rows, 1, o, stream);
}

// The same for partial (rows, 2C): columns < C into lo, the rest into hi.
inline void sum_partial_rows_split(const float* partial, int rows, int64_t C, float* lo, float* hi, bool add_lo,
                                   bool add_hi, Stream stream) {
  PartialSumsOut o;
  o.out[0] = lo;
  o.out[1] = hi;
  o.add[0] = add_lo;
  o.add[1] = add_hi;
  o.seg = C;
  sum_partial_rows_into(partial, rows, 2, o, stream);
}

}  // namespace ft::cuda
