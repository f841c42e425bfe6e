#include "core/cuda/check.h"
#include "ops/cuda/dtype_dispatch.cuh"
#include "ops/cuda/partial_sums.cuh"
#include "ops/cuda/reduce.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kWarpsPerBlock = kBlock / 32;
// Rows at least this long get a whole block each; shorter ones a warp each.
constexpr int64_t kBlockRowLength = 4096;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// inner == 1, short rows: one warp per row.
template <class T>
__global__ void reduce_rows_warp_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t r,
                                        float scale) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* xr = x + row * r;
  float acc = 0.f;
  for (int64_t j = lane; j < r; j += 32) acc += to_f32(xr[j]);
  acc = warp_sum(acc);
  if (lane == 0) y[row] = from_f32<T>(acc * scale);
}

// inner == 1, long rows: one block per row.
template <class T>
__global__ void reduce_rows_block_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t r, float scale) {
  __shared__ float warp_acc[kWarpsPerBlock];
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * r;
  float acc = 0.f;
  for (int64_t j = threadIdx.x; j < r; j += kBlock) acc += to_f32(xr[j]);
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) warp_acc[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < kWarpsPerBlock ? warp_acc[threadIdx.x] : 0.f;
    acc = warp_sum(acc);
    if (threadIdx.x == 0) y[blockIdx.x] = from_f32<T>(acc * scale);
  }
}

// inner > 1: a block of (32 columns, 8 rows) threads covers one column tile of one outer index
// (both from blockIdx.x) over the rows of slice blockIdx.z; consecutive threads read consecutive
// columns (coalesced). With one slice the result goes to y, otherwise fp32 partial sums go to
// partial (splits, outer, inner).
template <class T>
__global__ void reduce_cols_kernel(const T* __restrict__ x, T* __restrict__ y, float* __restrict__ partial,
                                   int64_t outer, int64_t r, int64_t inner, int64_t col_tiles,
                                   int64_t rows_per_split, float scale) {
  __shared__ float tile[kReduceRowsPerBlock][kReduceColsPerBlock + 1];
  const int64_t o = blockIdx.x / col_tiles;
  const int64_t col = (blockIdx.x % col_tiles) * kReduceColsPerBlock + threadIdx.x;
  const int64_t begin = static_cast<int64_t>(blockIdx.z) * rows_per_split;
  const int64_t end = begin + rows_per_split < r ? begin + rows_per_split : r;
  float acc = 0.f;
  if (col < inner) {
    const T* xo = x + o * r * inner + col;
    for (int64_t j = begin + threadIdx.y; j < end; j += kReduceRowsPerBlock) acc += to_f32(xo[j * inner]);
  }
  tile[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || col >= inner) return;
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kReduceRowsPerBlock; ++i) sum += tile[i][threadIdx.x];
  if (gridDim.z == 1) {
    y[o * inner + col] = from_f32<T>(sum * scale);
  } else {
    partial[(static_cast<int64_t>(blockIdx.z) * outer + o) * inner + col] = sum;
  }
}

// Sums the slices' partial sums in slice order (deterministic).
template <class T>
__global__ void reduce_splits_kernel(const float* __restrict__ partial, T* __restrict__ y, int64_t n, int splits,
                                     float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    float sum = 0.f;
    for (int s = 0; s < splits; ++s) sum += partial[s * n + i];
    y[i] = from_f32<T>(sum * scale);
  }
}

template <class T>
__global__ void reduce_backward_kernel(const T* __restrict__ dy, T* __restrict__ dx, int64_t n, int64_t r,
                                       int64_t inner, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const int64_t o = i / (r * inner);
    const int64_t c = i % inner;
    dx[i] = from_f32<T>(to_f32(dy[o * inner + c]) * scale);
  }
}

// sum_rows_into, stage 1: a block of (32, 8) threads covers 32 * kVec columns of one slice of
// rows; each thread sums kVec columns (one 16-byte load per row) over every 8th row of the slice,
// then the 8 row lanes are summed in order through shared memory.
template <class T, int kVec>
__global__ void __launch_bounds__(256) sum_rows_partial_kernel(SumRowsIntoParams p, int64_t rows_per_split) {
  __shared__ float acc_s[8][32 * kVec];
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x) * kVec;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t end = begin + rows_per_split < p.rows ? begin + rows_per_split : p.rows;
  float acc[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) acc[j] = 0.f;
  if (col < p.cols) {
    const T* x = static_cast<const T*>(p.x) + col;
    for (int64_t r = begin + threadIdx.y; r < end; r += 8) {
      float v[kVec];
      if constexpr (kVec > 1) {
        load_vec<kVec>(x + r * p.row_stride, v);
      } else {
        v[0] = to_f32(x[r * p.row_stride]);
      }
#pragma unroll
      for (int j = 0; j < kVec; ++j) acc[j] += v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j) acc_s[threadIdx.y][threadIdx.x * kVec + j] = acc[j];
  __syncthreads();
  if (threadIdx.y != 0 || col >= p.cols) return;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += acc_s[i][threadIdx.x * kVec + j];
    p.partial[static_cast<int64_t>(blockIdx.y) * p.cols + col + j] = sum;
  }
}

}  // namespace

void sum_rows_into(const SumRowsIntoParams& p, Stream s) {
  if (p.rows == 0 || p.cols == 0) return;
  dispatch_cuda_float(p.dtype, "[sum_rows_into]", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const int64_t rows_per_split = (p.rows + p.splits - 1) / p.splits;
    const dim3 block(32, 8);
    // 16-byte loads need every row start 16-byte aligned and whole vectors per row.
    const bool vec = reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && p.cols % kVec == 0 && p.row_stride % kVec == 0;
    if (vec) {
      const dim3 grid(static_cast<unsigned>((p.cols + 32 * kVec - 1) / (32 * kVec)), static_cast<unsigned>(p.splits));
      sum_rows_partial_kernel<T, kVec><<<grid, block, 0, s>>>(p, rows_per_split);
    } else {
      const dim3 grid(static_cast<unsigned>((p.cols + 31) / 32), static_cast<unsigned>(p.splits));
      sum_rows_partial_kernel<T, 1><<<grid, block, 0, s>>>(p, rows_per_split);
    }
    CUDA_CHECK_LAUNCH();
    sum_partial_rows(p.partial, p.splits, p.cols, p.out, /*add=*/true, s);  // stage 2: out += the slices' sums
  });
}

void reduce_sum(const ReduceParams& p, Stream s) {
  dispatch_cuda_float(p.dtype, "[sum]", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p.x);
    T* y = static_cast<T*>(p.y);
    if (p.inner == 1) {
      if (p.r >= kBlockRowLength) {
        reduce_rows_block_kernel<T><<<static_cast<unsigned>(p.outer), kBlock, 0, s>>>(x, y, p.r, p.scale);
      } else {
        const unsigned blocks = static_cast<unsigned>((p.outer + kWarpsPerBlock - 1) / kWarpsPerBlock);
        reduce_rows_warp_kernel<T><<<blocks, kBlock, 0, s>>>(x, y, p.outer, p.r, p.scale);
      }
      CUDA_CHECK_LAUNCH();
      return;
    }
    FT_ASSERT(p.splits >= 1 && (p.splits == 1 || p.partial), "splits ", p.splits);
    const int64_t rows_per_split = (p.r + p.splits - 1) / p.splits;
    const int64_t col_tiles = (p.inner + kReduceColsPerBlock - 1) / kReduceColsPerBlock;
    const dim3 grid(static_cast<unsigned>(col_tiles * p.outer), 1, static_cast<unsigned>(p.splits));
    const dim3 block(kReduceColsPerBlock, kReduceRowsPerBlock);
    reduce_cols_kernel<T><<<grid, block, 0, s>>>(x, y, p.partial, p.outer, p.r, p.inner, col_tiles, rows_per_split,
                                                 p.scale);
    CUDA_CHECK_LAUNCH();
    if (p.splits > 1) {
      const int64_t n = p.outer * p.inner;
      reduce_splits_kernel<T><<<grid_1d(n, kBlock), kBlock, 0, s>>>(p.partial, y, n, p.splits, p.scale);
      CUDA_CHECK_LAUNCH();
    }
  });
}

void reduce_backward(const ReduceBackwardParams& p, Stream s) {
  dispatch_cuda_float(p.dtype, "[reduce_backward]", [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = p.outer * p.r * p.inner;
    reduce_backward_kernel<T><<<grid_1d(n, kBlock), kBlock, 0, s>>>(static_cast<const T*>(p.dy),
                                                                    static_cast<T*>(p.dx), n, p.r, p.inner, p.scale);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
