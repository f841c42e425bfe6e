// CUDA ReLU: one 16-byte vector per thread per grid-stride step (the GELU kernel's layout), values
// through fp32, which is exact for a selection. Misaligned buffers take kVec = 1.
#include "ops/cuda/relu.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float relu_value(float x) { return x > 0.f ? x : (x != x ? x : 0.f); }

template <class T, int kVec, bool kBackward>
__global__ void __launch_bounds__(kThreads) relu_kernel(ReluParams p) {
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
      for (int j = 0; j < kVec; ++j) r[j] = xv[j] > 0.f ? g[j] : 0.f;
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) r[j] = relu_value(xv[j]);
    }
    store_vec<kVec>(out + i * kVec, r);
  }
  const int64_t e = nvec * kVec + tid;  // the n % kVec tail, one element per thread
  if (e < p.n) {
    const float xv = to_f32(x[e]);
    out[e] = from_f32<T>(kBackward ? (xv > 0.f ? to_f32(dy[e]) : 0.f) : relu_value(xv));
  }
}

template <bool kBackward>
void launch(const ReluParams& p, Stream stream, const char* op) {
  if (p.n == 0) return;
  dispatch_cuda_float(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const bool vec_ok = aligned16(p.x) && aligned16(p.out) && (!kBackward || aligned16(p.dy));
    auto blocks_for = [&](int vec) {
      return static_cast<unsigned>(std::clamp<int64_t>((p.n / vec + kThreads - 1) / kThreads, 1, int64_t{1} << 30));
    };
    if (vec_ok) {
      relu_kernel<T, kVec, kBackward><<<blocks_for(kVec), kThreads, 0, stream>>>(p);
    } else {
      relu_kernel<T, 1, kBackward><<<blocks_for(1), kThreads, 0, stream>>>(p);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void relu_forward(const ReluParams& p, Stream stream) { launch<false>(p, stream, "[relu_forward]"); }
void relu_backward(const ReluParams& p, Stream stream) { launch<true>(p, stream, "[relu_backward]"); }

}  // namespace ft::cuda
