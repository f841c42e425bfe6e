#include "core/cuda/check.h"
#include "ops/cuda/dtype_dispatch.cuh"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;

__device__ __forceinline__ float binary_op(BinaryKind kind, float x, float y) {
  return kind == BinaryKind::Add ? x + y : (kind == BinaryKind::Sub ? x - y : x * y);
}

template <class T>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                              int64_t n, int64_t nb, BinaryKind kind) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float x = to_f32(a[i]);
    const float y = to_f32(b[nb == n ? i : i % nb]);
    out[i] = from_f32<T>(binary_op(kind, x, y));
  }
}

// binary_kernel with 16-byte loads and stores, kVec elements a thread (n and nb multiples of kVec,
// every pointer 16-byte aligned): the same arithmetic element by element, so the same bits. The
// scalar kernel moved 2 bytes a load and took a 64-bit modulo per element for a broadcast b; the
// embedding sum (16384 x 768 bf16 plus the position table) took 56 us that way.
template <class T, int kVec>
__global__ void binary_vec_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,
                                  int64_t nvec, int64_t nbvec, BinaryKind kind) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < nvec; v += stride) {
    float x[kVec], y[kVec], r[kVec];
    load_vec<kVec>(a + v * kVec, x);
    load_vec<kVec>(b + (nbvec == nvec ? v : v % nbvec) * kVec, y);
#pragma unroll
    for (int j = 0; j < kVec; ++j) r[j] = binary_op(kind, x[j], y[j]);
    store_vec<kVec>(out + v * kVec, r);
  }
}

template <class T, class X = T>
__global__ void axpby_kernel(const X* __restrict__ x, T* out, int64_t n, float alpha, float beta,
                             const float* __restrict__ alpha_device) {
  if (alpha_device != nullptr) alpha *= *alpha_device;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    // One rounding order for both kernels: alpha x fused onto beta out.
    out[i] = from_f32<T>(beta != 0.f ? __fmaf_rn(alpha, to_f32(x[i]), beta * to_f32(out[i])) : alpha * to_f32(x[i]));
  }
}

// axpby_kernel with out's 16-byte vectors (kVec elements a thread; x's kVec elements are
// 16 or 8 bytes): the same arithmetic element by element, so the same bits. The scalar kernel
// moved the chunked head's 155 MB fp32 dw into its gradient at 2.8 TB/s (166 us a step).
template <class T, class X, int kVec>
__global__ void axpby_vec_kernel(const X* __restrict__ x, T* out, int64_t nvec, float alpha, float beta,
                                 const float* __restrict__ alpha_device) {
  if (alpha_device != nullptr) alpha *= *alpha_device;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < nvec; v += stride) {
    float xv[kVec], r[kVec];
    load_vec<kVec>(x + v * kVec, xv);
    if (beta != 0.f) {
      float prev[kVec];
      load_vec<kVec>(out + v * kVec, prev);
#pragma unroll
      for (int j = 0; j < kVec; ++j) r[j] = __fmaf_rn(alpha, xv[j], beta * prev[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) r[j] = alpha * xv[j];
    }
    store_vec<kVec>(out + v * kVec, r);
  }
}

// Integer <-> floating conversions go through double so int32 ids survive exactly.
template <class S>
__device__ __forceinline__ double load_as_double(S x) { return static_cast<double>(x); }
__device__ __forceinline__ double load_as_double(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ double load_as_double(__half x) { return __half2float(x); }

template <class D>
__device__ __forceinline__ D store_from_double(double v) { return static_cast<D>(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 store_from_double<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn(static_cast<float>(v));
}
template <>
__device__ __forceinline__ __half store_from_double<__half>(double v) {
  return __float2half_rn(static_cast<float>(v));
}

template <class S, class D>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    dst[i] = store_from_double<D>(load_as_double(src[i]));
  }
}

template <class Fn>
void dispatch_any(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(float{}); return;
    case DType::BF16: fn(__nv_bfloat16{}); return;
    case DType::F16: fn(__half{}); return;
    case DType::F64: fn(double{}); return;
    case DType::I32: fn(int32_t{}); return;
    case DType::I64: fn(int64_t{}); return;
    case DType::U16: fn(uint16_t{}); return;
    case DType::U8: fn(uint8_t{}); return;
  }
}

}  // namespace

void binary(const BinaryParams& p, Stream s) {
  dispatch_cuda_float(p.dtype, "[binary]", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    if (p.n % kVec == 0 && p.nb % kVec == 0 && aligned16(p.a) && aligned16(p.b) && aligned16(p.out)) {
      binary_vec_kernel<T, kVec><<<grid_1d(p.n / kVec, kBlock), kBlock, 0, s>>>(
          static_cast<const T*>(p.a), static_cast<const T*>(p.b), static_cast<T*>(p.out), p.n / kVec, p.nb / kVec, p.kind);
    } else {
      binary_kernel<T><<<grid_1d(p.n, kBlock), kBlock, 0, s>>>(static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                                                               static_cast<T*>(p.out), p.n, p.nb, p.kind);
    }
  });
  CUDA_CHECK_LAUNCH();
}

namespace {

// out = alpha x + beta out with out's 16-byte vectors where n and both pointers allow, else
// element by element.
template <class T, class X>
void launch_axpby(const AxpbyParams& p, Stream s) {
  constexpr int kVec = kVecOf<T>;
  if (p.n % kVec == 0 && aligned16(p.out) && aligned_to(p.x, sizeof(X) * kVec)) {
    axpby_vec_kernel<T, X, kVec><<<grid_1d(p.n / kVec, kBlock), kBlock, 0, s>>>(
        static_cast<const X*>(p.x), static_cast<T*>(p.out), p.n / kVec, p.alpha, p.beta, p.alpha_device);
  } else {
    axpby_kernel<T, X><<<grid_1d(p.n, kBlock), kBlock, 0, s>>>(static_cast<const X*>(p.x), static_cast<T*>(p.out),
                                                               p.n, p.alpha, p.beta, p.alpha_device);
  }
}

}  // namespace

void axpby(const AxpbyParams& p, Stream s) {
  if (p.widen_x) {  // f32 out, bf16 / f16 x
    FT_CHECK_ARG(p.dtype == DType::F32 && (p.x_dtype == DType::BF16 || p.x_dtype == DType::F16),
                 "[axpby] mixed dtypes are f32 out and bf16 / f16 x, got ", p.dtype, " and ", p.x_dtype);
    dispatch_cuda_float(p.x_dtype, "[axpby]", [&](auto xtag) { launch_axpby<float, decltype(xtag)>(p, s); });
    CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_cuda_float(p.dtype, "[axpby]", [&](auto tag) {
    using T = decltype(tag);
    launch_axpby<T, T>(p, s);
  });
  CUDA_CHECK_LAUNCH();
}

void cast(const CastParams& p, Stream s) {
  dispatch_any(p.src_dtype, [&](auto stag) {
    using S = decltype(stag);
    dispatch_any(p.dst_dtype, [&](auto dtag) {
      using D = decltype(dtag);
      cast_kernel<S, D><<<grid_1d(p.n, kBlock), kBlock, 0, s>>>(static_cast<const S*>(p.src), static_cast<D*>(p.dst), p.n);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
