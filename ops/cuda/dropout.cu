#include "core/cuda/check.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kGroup = 8;  // columns per Philox call (eight 16-bit pieces)

// Eight consecutive elements, aligned so that one group is one (bf16/f16) or two (f32) 16-byte
// memory transactions.
template <class T>
struct alignas(kGroup * sizeof(T)) Pack8 {
  T v[kGroup];
};

// One thread per (row, group of 8 columns): one Philox call covers the whole group. kVec: cols is
// a multiple of 8 and the buffers are Pack8-aligned, so the group moves as one vector.
template <class T, bool kVec>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                               int64_t groups, DropoutParams d) {
  resolve_dropout_offset(d);  // graph replay: the offset lives in device memory
  const int64_t n = rows * groups;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const int64_t row = i / groups;
    const int64_t g = i % groups;
    const PhiloxBits bits = dropout_bits(d, 0, static_cast<uint32_t>(row), static_cast<uint32_t>(g));
    const int64_t base = row * cols + g * kGroup;
    if constexpr (kVec) {
      const Pack8<T> in = *reinterpret_cast<const Pack8<T>*>(x + base);
      Pack8<T> out;
#pragma unroll
      for (int j = 0; j < kGroup; ++j)
        out.v[j] = from_f32<T>(dropout_keep(bits, j, d.threshold) ? to_f32(in.v[j]) * d.keep_scale : 0.f);
      *reinterpret_cast<Pack8<T>*>(y + base) = out;
    } else {
      const int64_t left = cols - g * kGroup;
      const int count = left < kGroup ? static_cast<int>(left) : kGroup;
      for (int j = 0; j < count; ++j)
        y[base + j] = from_f32<T>(dropout_keep(bits, j, d.threshold) ? to_f32(x[base + j]) * d.keep_scale : 0.f);
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
    const int64_t groups = (p.cols + kGroup - 1) / kGroup;
    const unsigned grid = grid_1d(p.rows * groups, kBlock);
    const bool vec = p.cols % kGroup == 0 && aligned(x, sizeof(Pack8<T>)) && aligned(y, sizeof(Pack8<T>));
    if (vec) dropout_kernel<T, true><<<grid, kBlock, 0, s>>>(x, y, p.rows, p.cols, groups, p.mask);
    else dropout_kernel<T, false><<<grid, kBlock, 0, s>>>(x, y, p.rows, p.cols, groups, p.mask);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
