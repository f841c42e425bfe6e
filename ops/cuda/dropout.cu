#include "core/cuda/check.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kPack = 8;  // elements per vector access

// Eight consecutive elements, aligned so that they move as one (bf16/f16) or two (f32) 16-byte
// memory transactions.
template <class T>
struct alignas(kPack * sizeof(T)) Pack8 {
  T v[kPack];
};

// One thread per pair of rows (r, r + 8 of a 16-row block) and 16-column block: the 32 elements of
// four Philox calls (core/dropout_mask.h), c = 0..3. Neighbouring threads take neighbouring column
// blocks of the same rows, so the loads coalesce. kVec: cols is a multiple of 16 and the buffers
// are Pack8-aligned, so each row's 16 elements move as two vectors.
template <class T, bool kVec>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                               int64_t col_blocks, DropoutParams d) {
  resolve_dropout_offset(d);  // graph replay: the offset lives in device memory
  const int64_t n = (rows + 15) / 16 * 8 * col_blocks;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const int64_t cb = i % col_blocks;
    const int64_t pair = i / col_blocks;  // = dropout_row_pair(row0)
    const int64_t row0 = pair / 8 * 16 + pair % 8;
    PhiloxBits bits[4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
      bits[c] = dropout_bits(d, 0, static_cast<uint32_t>(pair), static_cast<uint32_t>(4 * cb + c));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row0 + 8 * h;
      if (row >= rows) break;
      const int64_t col0 = cb * 16;
      const int64_t base = row * cols + col0;
      auto apply = [&](int j, float v) {
        const uint32_t r = static_cast<uint32_t>(row), c = static_cast<uint32_t>(col0 + j);
        return from_f32<T>(dropout_keep(bits[(j & 7) >> 1], r, c, d.threshold) ? v * d.keep_scale : 0.f);
      };
      if constexpr (kVec) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const Pack8<T> in = *reinterpret_cast<const Pack8<T>*>(x + base + kPack * half);
          Pack8<T> out;
#pragma unroll
          for (int j = 0; j < kPack; ++j) out.v[j] = apply(kPack * half + j, to_f32(in.v[j]));
          *reinterpret_cast<Pack8<T>*>(y + base + kPack * half) = out;
        }
      } else {
        const int64_t left = cols - col0;
        const int count = left < 16 ? static_cast<int>(left) : 16;
        for (int j = 0; j < count; ++j) y[base + j] = apply(j, to_f32(x[base + j]));
      }
    }
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void dropout(const DropoutKernelParams& p, Stream s) {
  dispatch_cuda_float(p.dtype, "[dropout]", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p.x);
    T* y = static_cast<T*>(p.y);
    const int64_t col_blocks = (p.cols + 15) / 16;
    const unsigned grid = grid_1d((p.rows + 15) / 16 * 8 * col_blocks, kBlock);
    const bool vec = p.cols % 16 == 0 && aligned(x, sizeof(Pack8<T>)) && aligned(y, sizeof(Pack8<T>));
    if (vec) dropout_kernel<T, true><<<grid, kBlock, 0, s>>>(x, y, p.rows, p.cols, col_blocks, p.mask);
    else dropout_kernel<T, false><<<grid, kBlock, 0, s>>>(x, y, p.rows, p.cols, col_blocks, p.mask);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
