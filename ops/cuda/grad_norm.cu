#include "core/cuda/check.h"
#include "ops/cuda/grad_norm.h"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kFinalBlock = 1024;

template <int kThreads>
__device__ __forceinline__ double block_sum(double v) {
  __shared__ double warp_acc[kThreads / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warp_acc[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_acc[threadIdx.x] : 0.0;
  if (threadIdx.x < 32) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;  // valid in thread 0
}

// Stage 1: block b writes the sum of squares of its grid-stride share of x to partial[b].
// n4 > 0: x is 16-byte aligned and read as float4 for the first 4 * n4 elements.
__global__ void grad_norm_partial_kernel(const float* __restrict__ x, int64_t n, int64_t n4,
                                         double* __restrict__ partial) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  double acc = 0.0;
  for (int64_t i = first; i < n4; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    acc += static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
           static_cast<double>(v.w) * v.w;
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) acc += static_cast<double>(x[i]) * x[i];
  acc = block_sum<kBlock>(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Stage 2: one block sums all partials in a fixed order and writes the norm and the flag.
__global__ void grad_norm_final_kernel(const double* __restrict__ partial, int count, float* __restrict__ norm,
                                       float* __restrict__ nonfinite) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += kFinalBlock) acc += partial[i];
  acc = block_sum<kFinalBlock>(acc);
  if (threadIdx.x == 0) {
    *norm = static_cast<float>(sqrt(acc));
    *nonfinite = isfinite(acc) ? 0.f : 1.f;
  }
}

}  // namespace

void grad_norm(const GradNormParams& p, Stream s) {
  int offset = 0;
  for (int i = 0; i < p.count; ++i) {
    const GradNormSegment& seg = p.segments[i];
    const int blocks = grad_norm_blocks(seg.n);
    const int64_t n4 = reinterpret_cast<uintptr_t>(seg.x) % 16 == 0 ? seg.n / 4 : 0;
    grad_norm_partial_kernel<<<blocks, kBlock, 0, s>>>(seg.x, seg.n, n4, p.partial + offset);
    CUDA_CHECK_LAUNCH();
    offset += blocks;
  }
  grad_norm_final_kernel<<<1, kFinalBlock, 0, s>>>(p.partial, offset, p.norm, p.nonfinite);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
