// CUDA-side element types and the dtype switch used by launchers.
//
//   dispatch_cuda_float(p.dtype, "[gelu]", [&](auto tag) {
//     using T = decltype(tag);                 // float, __nv_bfloat16 or __half
//     gelu_forward_kernel<T><<<grid, block, 0, stream>>>(...);
//   });
//
// Kernels load T, compute in float with to_f32 and store with from_f32<T>: fp32 math everywhere.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/dtype.h"
#include "core/error.h"

namespace ft::cuda {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

// Calls fn(T{}) for T = float, __nv_bfloat16 or __half; throws naming `op` for other dtypes.
template <class Fn>
void dispatch_cuda_float(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(float{}); return;
    case DType::BF16: fn(__nv_bfloat16{}); return;
    case DType::F16: fn(__half{}); return;
    default: break;
  }
  throw Error(str(op, " CUDA kernel takes f32, bf16 or f16, got ", t));
}

inline unsigned grid_1d(int64_t n, int block, int64_t max_blocks = 65535 * 8) {
  const int64_t b = (n + block - 1) / block;
  return static_cast<unsigned>(b < 1 ? 1 : (b > max_blocks ? max_blocks : b));
}

}  // namespace ft::cuda
