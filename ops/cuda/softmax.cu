// CUDA softmax over the last axis. Two paths, picked at the launcher, as in layernorm.cu:
// - register path (16-byte aligned rows, C a multiple of the vector width, up to 16 vectors per
//   lane): one warp per row, the row in registers, one read and one write per element;
// - looping path (any C, any alignment): one block per row; an online max/sum pass, then a pass
//   that writes (the forward reads x twice, the backward reads y and dy twice).
#include "ops/cuda/softmax.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kWarps = 4;          // rows per block in the register path
constexpr int kLoopThreads = 256;  // threads per row in the looping path
// The backward register path holds y and dy per lane; past 64 elements each ptxas would spill.
constexpr int kBwdMaxElems = 64;

template <class T, int kIters>
__global__ void __launch_bounds__(kWarps * kWarpSize) softmax_forward_warp_kernel(SoftmaxParams p) {
  constexpr int kVec = kVecOf<T>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= p.rows) return;
  const int nvec = static_cast<int>(p.cols / kVec);
  const T* x = static_cast<const T*>(p.x) + row * p.cols;  // (C)
  float v[kIters][kVec];
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
      load_vec<kVec>(x + i * kVec, v[k]);
#pragma unroll
      for (int j = 0; j < kVec; ++j) m = fmaxf(m, v[k][j]);
    }
  }
  m = warp_max(m);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    if (lane + k * kWarpSize < nvec) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        v[k][j] = __expf(v[k][j] - m);
        s += v[k][j];
      }
    }
  }
  const float inv = 1.f / warp_sum(s);
  T* y = static_cast<T*>(p.out) + row * p.cols;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[k][j] *= inv;
      store_vec<kVec>(y + i * kVec, v[k]);
    }
  }
}

template <class T, int kIters>
__global__ void __launch_bounds__(kWarps * kWarpSize) softmax_backward_warp_kernel(SoftmaxParams p) {
  constexpr int kVec = kVecOf<T>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize;
  if (row >= p.rows) return;
  const int nvec = static_cast<int>(p.cols / kVec);
  const T* y = static_cast<const T*>(p.y) + row * p.cols;    // (C)
  const T* dy = static_cast<const T*>(p.dy) + row * p.cols;  // (C)
  float yv[kIters][kVec], gv[kIters][kVec];
  float dot = 0.f;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
      load_vec<kVec>(y + i * kVec, yv[k]);
      load_vec<kVec>(dy + i * kVec, gv[k]);
#pragma unroll
      for (int j = 0; j < kVec; ++j) dot += yv[k][j] * gv[k][j];
    }
  }
  dot = warp_sum(dot);
  T* dx = static_cast<T*>(p.out) + row * p.cols;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
      float out[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[j] = yv[k][j] * (gv[k][j] - dot);
      store_vec<kVec>(dx + i * kVec, out);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kLoopThreads) softmax_forward_loop_kernel(SoftmaxParams p) {
  __shared__ float scratch[kWarpSize];
  const int64_t C = p.cols;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * C;
    float m = -INFINITY, s = 0.f;  // this thread's running max and sum of exp(x - m)
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float v = to_f32(x[c]);
      const float m_new = fmaxf(m, v);
      if (m_new != -INFINITY) {  // all -inf so far: nothing to add yet
        s = s * __expf(m - m_new) + __expf(v - m_new);
        m = m_new;
      }
    }
    const float row_max = block_max(m, scratch);
    const float inv = 1.f / block_sum(m == -INFINITY ? 0.f : s * __expf(m - row_max), scratch);
    T* y = static_cast<T*>(p.out) + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) y[c] = from_f32<T>(__expf(to_f32(x[c]) - row_max) * inv);
  }
}

template <class T>
__global__ void __launch_bounds__(kLoopThreads) softmax_backward_loop_kernel(SoftmaxParams p) {
  __shared__ float scratch[kWarpSize];
  const int64_t C = p.cols;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* y = static_cast<const T*>(p.y) + row * C;
    const T* dy = static_cast<const T*>(p.dy) + row * C;
    float dot = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += to_f32(y[c]) * to_f32(dy[c]);
    dot = block_sum(dot, scratch);
    T* dx = static_cast<T*>(p.out) + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dx[c] = from_f32<T>(to_f32(y[c]) * (to_f32(dy[c]) - dot));
  }
}

template <bool kBackward>
void launch(const SoftmaxParams& p, Stream stream, const char* op) {
  if (p.rows == 0) return;
  dispatch_cuda_float(p.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const bool vec_ok = p.cols % kVec == 0 && aligned16(p.out) &&
                        (kBackward ? aligned16(p.y) && aligned16(p.dy) : aligned16(p.x));
    const int64_t iters = (p.cols / kVec + kWarpSize - 1) / kWarpSize;
    constexpr int kMaxIters = kBackward ? kBwdMaxElems / kVec : 16;
    const bool done = vec_ok && dispatch_iters<kMaxIters>(iters, [&](auto k) {
      constexpr int kIters = decltype(k)::value;
      const auto blocks = static_cast<unsigned>((p.rows + kWarps - 1) / kWarps);
      if constexpr (kBackward) {
        softmax_backward_warp_kernel<T, kIters><<<blocks, kWarps * kWarpSize, 0, stream>>>(p);
      } else {
        softmax_forward_warp_kernel<T, kIters><<<blocks, kWarps * kWarpSize, 0, stream>>>(p);
      }
      CUDA_CHECK_LAUNCH();
    });
    if (!done) {
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(p.rows, int64_t{1} << 30));
      if constexpr (kBackward) {
        softmax_backward_loop_kernel<T><<<blocks, kLoopThreads, 0, stream>>>(p);
      } else {
        softmax_forward_loop_kernel<T><<<blocks, kLoopThreads, 0, stream>>>(p);
      }
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace

void softmax_forward(const SoftmaxParams& p, Stream stream) { launch<false>(p, stream, "[softmax_forward]"); }
void softmax_backward(const SoftmaxParams& p, Stream stream) { launch<true>(p, stream, "[softmax_backward]"); }

}  // namespace ft::cuda
