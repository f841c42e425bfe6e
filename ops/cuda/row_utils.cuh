// Device helpers shared by the row-wise kernels (layernorm, softmax, cross-entropy, embedding,
// GELU): 16-byte vector loads and stores with fp32 conversion, warp and block reductions, the
// choice of registers per lane, and launcher scratch memory. Element conversions and the dtype
// switch come from dtype_dispatch.cuh.
//
// Activations are bf16, f16 or f32; all arithmetic is fp32. A "vector" is 16 bytes: 8 halves or
// 4 floats, so each load is one 128-bit transaction per thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/allocator.h"
#include "core/cuda/check.h"
#include "core/dtype.h"
#include "core/error.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {

constexpr int kWarpSize = 32;

// Elements of T in one 16-byte vector.
template <class T>
constexpr int kVecOf = 16 / static_cast<int>(sizeof(T));

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// 16-byte vectors move as uint4: its alignment is part of its type, so the compiler always emits
// one 128-bit access (a struct of 8 halves was seen split into 2- and 4-byte stores).
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_raw(const T* p) {
  Vec<T, N> v;
  if constexpr (sizeof(Vec<T, N>) == 16) {
    const uint4 bits = *reinterpret_cast<const uint4*>(p);
    memcpy(&v, &bits, 16);
  } else {
    v = *reinterpret_cast<const Vec<T, N>*>(p);
  }
  return v;
}

template <class T, int N>
__device__ __forceinline__ void store_raw(T* p, const Vec<T, N>& v) {
  if constexpr (sizeof(Vec<T, N>) == 16) {
    uint4 bits;
    memcpy(&bits, &v, 16);
    *reinterpret_cast<uint4*>(p) = bits;
  } else {
    *reinterpret_cast<Vec<T, N>*>(p) = v;
  }
}

// Loads N consecutive elements at p (aligned to N * sizeof(T) bytes) as floats.
template <int N, class T>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[N]) {
  const Vec<T, N> v = load_raw<T, N>(p);
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = to_f32(v.v[j]);
}

// Stores N floats, rounded to T, at p (aligned to N * sizeof(T) bytes).
template <int N, class T>
__device__ __forceinline__ void store_vec(T* p, const float (&in)[N]) {
  Vec<T, N> v;
#pragma unroll
  for (int j = 0; j < N; ++j) v.v[j] = from_f32<T>(in[j]);
  store_raw<T, N>(p, v);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = kWarpSize / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block, returned to every thread. `scratch` holds 32 floats in shared memory; the
// call ends with a barrier, so the same scratch may be reused by the next reduction.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int nwarps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int nwarps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}

// Row-in-registers kernels give each lane kIters vectors of a row. Calls
// fn(std::integral_constant<int, K>{}) with the smallest K in {1, 2, 3, 4, 6, 8, 12, 16} that is
// >= iters and <= kMaxIters, and returns true; returns false when there is none (the caller takes
// a looping path). The set keeps instantiations few while wasting at most a third of the
// registers; kMaxIters keeps kernels that hold more per lane from spilling.
template <int kMaxIters, class Fn>
bool dispatch_iters(int64_t iters, Fn&& fn) {
  bool done = false;
  auto try_k = [&](auto k) {
    constexpr int K = decltype(k)::value;
    if constexpr (K <= kMaxIters) {
      if (!done && iters <= K) {
        fn(k);
        done = true;
      }
    }
  };
  try_k(std::integral_constant<int, 1>{});
  try_k(std::integral_constant<int, 2>{});
  try_k(std::integral_constant<int, 3>{});
  try_k(std::integral_constant<int, 4>{});
  try_k(std::integral_constant<int, 6>{});
  try_k(std::integral_constant<int, 8>{});
  try_k(std::integral_constant<int, 12>{});
  try_k(std::integral_constant<int, 16>{});
  return done;
}

// Temporary device memory for a launcher (partial sums, sort buffers), returned to the caching
// allocator when the launcher returns. Safe without synchronising because all work on a device is
// issued on its one stream, in order (core/allocator.h).
struct Scratch {
  Scratch(int device, size_t bytes)
      : alloc(cuda_allocator(device)), bytes(bytes), ptr(alloc.allocate(bytes)) {}
  ~Scratch() { alloc.deallocate(ptr, bytes); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Allocator& alloc;
  size_t bytes;
  void* ptr;
};

inline int sm_count(int device) {
  int n = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  return n;
}

// The grid of a persistent kernel whose CTA fills an SM (the attention ws kernels): one CTA per SM,
// but no more than `items` work items; cap > 0 lowers it further (tests, so that each CTA walks many).
inline int64_t persistent_grid(int device, int64_t items, int cap = 0) {
  const int sms = sm_count(device);
  return std::min<int64_t>(items, cap > 0 ? std::min(cap, sms) : sms);
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
inline bool aligned16(const void* p) { return aligned_to(p, 16); }

}  // namespace ft::cuda
