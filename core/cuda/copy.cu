#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda/check.h"
#include "core/cuda/copy.h"

namespace ft::cuda {
namespace {

template <class T>
__global__ void strided_copy_kernel(StridedCopyParams p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < p.numel; i += stride) {
    int64_t rem = i, d_off = 0, s_off = 0;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const int64_t idx = rem % p.shape[d];
      rem /= p.shape[d];
      d_off += idx * p.dst_strides[d];
      s_off += idx * p.src_strides[d];
    }
    static_cast<T*>(p.dst)[d_off] = static_cast<const T*>(p.src)[s_off];
  }
}

template <class T>
__global__ void fill_kernel(T* dst, int64_t n, T value) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) dst[i] = value;
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

template <class T>
void launch_fill(void* dst, int64_t n, T v, Stream s) {
  fill_kernel<T><<<grid_for(n), 256, 0, s>>>(static_cast<T*>(dst), n, v);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void strided_copy(const StridedCopyParams& p, Stream s) {
  switch (p.elem_size) {
    case 1: strided_copy_kernel<uint8_t><<<grid_for(p.numel), 256, 0, s>>>(p); break;
    case 2: strided_copy_kernel<uint16_t><<<grid_for(p.numel), 256, 0, s>>>(p); break;
    case 4: strided_copy_kernel<uint32_t><<<grid_for(p.numel), 256, 0, s>>>(p); break;
    case 8: strided_copy_kernel<uint64_t><<<grid_for(p.numel), 256, 0, s>>>(p); break;
    default: FT_ASSERT(false, "element size ", p.elem_size);
  }
  CUDA_CHECK_LAUNCH();
}

void fill(void* dst, int64_t n, DType dtype, double value, Stream s) {
  if (value == 0.0) {
    CUDA_CHECK(cudaMemsetAsync(dst, 0, n * dtype_size(dtype), s));
    return;
  }
  switch (dtype) {
    case DType::F32: launch_fill(dst, n, static_cast<float>(value), s); break;
    case DType::BF16: launch_fill(dst, n, __float2bfloat16(static_cast<float>(value)), s); break;
    case DType::F16: launch_fill(dst, n, __float2half(static_cast<float>(value)), s); break;
    case DType::I32: launch_fill(dst, n, static_cast<int32_t>(value), s); break;
    case DType::I64: launch_fill(dst, n, static_cast<int64_t>(value), s); break;
    case DType::U16: launch_fill(dst, n, static_cast<uint16_t>(value), s); break;
    case DType::U8: launch_fill(dst, n, static_cast<uint8_t>(value), s); break;
    case DType::F64: launch_fill(dst, n, value, s); break;
  }
}

void copy_bytes(void* dst, const void* src, size_t nbytes, bool dst_is_device, bool src_is_device, Stream s) {
  const cudaMemcpyKind kind = dst_is_device ? (src_is_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                            : (src_is_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, kind, s));
  if (!dst_is_device) CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace ft::cuda
