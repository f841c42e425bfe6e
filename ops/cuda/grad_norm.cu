#include <type_traits>

#include "core/cuda/check.h"
#include "ops/cuda/dtype_dispatch.cuh"
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

// The addends of a segment, passed by value.
struct Addends {
  const void* p[kGradNormMaxAddends];
  int count;
};

// Four consecutive addend elements from vector index i, as floats (16 bytes of f32, 8 of bf16 / f16).
template <class A>
__device__ __forceinline__ float4 load4(const void* p, int64_t i) {
  if constexpr (std::is_same_v<A, float>) {
    return reinterpret_cast<const float4*>(p)[i];
  } else {
    struct alignas(4 * sizeof(A)) Pack4 {
      A v[4];
    };
    const Pack4 q = reinterpret_cast<const Pack4*>(p)[i];
    return make_float4(to_f32(q.v[0]), to_f32(q.v[1]), to_f32(q.v[2]), to_f32(q.v[3]));
  }
}

__device__ __forceinline__ double squares(float4 v) {
  return static_cast<double>(v.x) * v.x + static_cast<double>(v.y) * v.y + static_cast<double>(v.z) * v.z +
         static_cast<double>(v.w) * v.w;
}

// Stage 1: block b writes the sum of squares of its grid-stride share of x to partial[b]. With
// addends, x += add[0] + ... + add[count - 1] first (in that order, as add_ would) and is written
// back. n4 > 0: x and the addends are aligned and read as 4-element vectors for the first 4 * n4.
template <class A>
__global__ void grad_norm_partial_kernel(float* __restrict__ x, int64_t n, int64_t n4, Addends add,
                                         double* __restrict__ partial) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  double acc = 0.0;
  for (int64_t i = first; i < n4; i += stride) {
    float4 v = reinterpret_cast<const float4*>(x)[i];
    if (add.count > 0) {
      for (int j = 0; j < add.count; ++j) {
        const float4 a = load4<A>(add.p[j], i);
        v.x += a.x;
        v.y += a.y;
        v.z += a.z;
        v.w += a.w;
      }
      reinterpret_cast<float4*>(x)[i] = v;
    }
    acc += squares(v);
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) {
    float v = x[i];
    if (add.count > 0) {
      for (int j = 0; j < add.count; ++j) v += to_f32(static_cast<const A*>(add.p[j])[i]);
      x[i] = v;
    }
    acc += static_cast<double>(v) * v;
  }
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

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void grad_norm(const GradNormParams& p, Stream s) {
  dispatch_cuda_float(p.add_dtype, "[grad_norm]", [&](auto tag) {
    using A = decltype(tag);
    int offset = 0;
    for (int i = 0; i < p.count; ++i) {
      const GradNormSegment& seg = p.segments[i];
      Addends add{};
      add.count = seg.adds;
      bool vec = aligned(seg.x, 16);
      for (int j = 0; j < seg.adds; ++j) {
        add.p[j] = seg.add[j];
        vec = vec && aligned(seg.add[j], 4 * sizeof(A));
      }
      const int blocks = grad_norm_blocks(seg.n);
      grad_norm_partial_kernel<A><<<blocks, kBlock, 0, s>>>(seg.x, seg.n, vec ? seg.n / 4 : 0, add, p.partial + offset);
      CUDA_CHECK_LAUNCH();
      offset += blocks;
    }
    grad_norm_final_kernel<<<1, kFinalBlock, 0, s>>>(p.partial, offset, p.norm, p.nonfinite);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
