// CUDA GELU: one 16-byte vector per thread per grid-stride step, fp32 math, x read once and the
// result written once (the backward also reads dy once). Misaligned buffers take kVec = 1.
#include "ops/cuda/gelu.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

__device__ __forceinline__ float gelu_value(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * x * (1.f + t);
}

// d/dx [0.5 x (1 + t)] with t = tanh(u), u = a (x + b x^3):
// 0.5 (1 + t) + 0.5 x (1 - t^2) a (1 + 3 b x^2).
__device__ __forceinline__ float gelu_grad(float x) {
  const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kCubic * x * x);
}

template <class T, int kVec, bool kBackward>
__global__ void __launch_bounds__(kThreads) gelu_kernel(GeluParams p) {
  const T* x = static_cast<const T*>(p.x);
  const T* dy = static_cast<const T*>(p.dy);
  T* out = static_cast<T*>(p.out);
  const int64_t nvec = p.n / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = tid; i < nvec; i += stride) {
    float xv[kVec], r[kVec];
    load_vec<kVec>(x + i * kVec, xv);
    if constexpr (kBackward) {
      float g[kVec];
      load_vec<kVec>(dy + i * kVec, g);
#pragma unroll
      for (int j = 0; j < kVec; ++j) r[j] = g[j] * gelu_grad(xv[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) r[j] = gelu_value(xv[j]);
    }
    store_vec<kVec>(out + i * kVec, r);
  }
  const int64_t e = nvec * kVec + tid;  // the n % kVec tail, one element per thread
  if (e < p.n) {
    const float xv = to_f32(x[e]);
    out[e] = from_f32<T>(kBackward ? to_f32(dy[e]) * gelu_grad(xv) : gelu_value(xv));
  }
}

template <bool kBackward>
void launch(const GeluParams& p, Stream stream, const char* op) {
  if (p.n == 0) return;
  dispatch_cuda_float(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const bool vec_ok = aligned16(p.x) && aligned16(p.out) && (!kBackward || aligned16(p.dy));
    // Enough blocks for every vector (the kernel still grid-strides if the cap binds).
    auto blocks_for = [&](int vec) {
      return static_cast<unsigned>(std::clamp<int64_t>((p.n / vec + kThreads - 1) / kThreads, 1, int64_t{1} << 30));
    };
    if (vec_ok) {
      gelu_kernel<T, kVec, kBackward><<<blocks_for(kVec), kThreads, 0, stream>>>(p);
    } else {
      gelu_kernel<T, 1, kBackward><<<blocks_for(1), kThreads, 0, stream>>>(p);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void gelu_forward(const GeluParams& p, Stream stream) { launch<false>(p, stream, "[gelu_forward]"); }
void gelu_backward(const GeluParams& p, Stream stream) { launch<true>(p, stream, "[gelu_backward]"); }

}  // namespace ft::cuda
