// CUDA pointwise activations: one 16-byte vector per thread per grid-stride step, fp32 math, x read
// once and the result written once (the backward also reads dy once). Misaligned buffers take
// kVec = 1. One kernel template serves every activation; only value() and grad() differ.
#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/activation.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

template <ActivationKind K>
__device__ __forceinline__ float value(float x) {
  if constexpr (K == ActivationKind::GeluTanh) {
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * x * (1.f + t);
  } else {
    return x > 0.f ? x : (x != x ? x : 0.f);  // NaN stays NaN
  }
}

// dy * f'(x). GELU: d/dx [0.5 x (1 + t)] with t = tanh(u), u = a (x + b x^3) is
// 0.5 (1 + t) + 0.5 x (1 - t^2) a (1 + 3 b x^2). ReLU: dy where x > 0 (0 at 0, as PyTorch).
template <ActivationKind K>
__device__ __forceinline__ float grad_times(float dy, float x) {
  if constexpr (K == ActivationKind::GeluTanh) {
    const float t = tanhf(kSqrt2OverPi * (x + kCubic * x * x * x));
    return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kSqrt2OverPi * (1.f + 3.f * kCubic * x * x));
  } else {
    return x > 0.f ? dy : 0.f;
  }
}

template <class T, int kVec, bool kBackward, ActivationKind K>
__global__ void __launch_bounds__(kThreads) activation_kernel(ActivationParams p) {
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
      for (int j = 0; j < kVec; ++j) r[j] = grad_times<K>(g[j], xv[j]);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) r[j] = value<K>(xv[j]);
    }
    store_vec<kVec>(out + i * kVec, r);
  }
  const int64_t e = nvec * kVec + tid;  // the n % kVec tail, one element per thread
  if (e < p.n) {
    const float xv = to_f32(x[e]);
    out[e] = from_f32<T>(kBackward ? grad_times<K>(to_f32(dy[e]), xv) : value<K>(xv));
  }
}

template <bool kBackward, ActivationKind K>
void launch(const ActivationParams& p, Stream stream, const char* op) {
  dispatch_cuda_float(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const bool vec_ok = aligned16(p.x) && aligned16(p.out) && (!kBackward || aligned16(p.dy));
    // Enough blocks for every vector (the kernel still grid-strides if the cap binds).
    auto blocks_for = [&](int vec) {
      return static_cast<unsigned>(std::clamp<int64_t>((p.n / vec + kThreads - 1) / kThreads, 1, int64_t{1} << 30));
    };
    if (vec_ok) {
      activation_kernel<T, kVec, kBackward, K><<<blocks_for(kVec), kThreads, 0, stream>>>(p);
    } else {
      activation_kernel<T, 1, kBackward, K><<<blocks_for(1), kThreads, 0, stream>>>(p);
    }
    CUDA_CHECK_LAUNCH();
  });
}

template <bool kBackward>
void launch_kind(const ActivationParams& p, Stream stream, const char* op) {
  if (p.n == 0) return;
  switch (p.kind) {
    case ActivationKind::GeluTanh: return launch<kBackward, ActivationKind::GeluTanh>(p, stream, op);
    case ActivationKind::Relu: return launch<kBackward, ActivationKind::Relu>(p, stream, op);
  }
}

}  // namespace

void activation_forward(const ActivationParams& p, Stream stream) { launch_kind<false>(p, stream, "[activation_forward]"); }
void activation_backward(const ActivationParams& p, Stream stream) { launch_kind<true>(p, stream, "[activation_backward]"); }

}  // namespace ft::cuda
