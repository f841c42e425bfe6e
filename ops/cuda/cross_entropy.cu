// CUDA cross-entropy fused with log-softmax over the vocabulary, fp32 math.
//
// One block per row. The forward reads the row once with an online max/sum (each thread keeps
// its own (max, sum of exp(x - max)) and the block combines them), so lse costs one pass over
// the logits; the target logit is one extra scalar load. The backward reads the row once and
// writes dlogits once: softmax is recomputed as exp(x - lse), so no (N, V) probabilities buffer
// exists. Contiguous rows of V = 50257 mostly start off a 16-byte boundary, so each row is walked
// as a scalar head up to the first boundary, a body of 16-byte vectors and a scalar tail (the
// GPT head's padded rows, MatmulOptions::align_rows, all start on one).
#include "ops/cuda/cross_entropy.h"

#include "core/cuda/check.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // vectors in flight per thread

// How a row splits into [0, head) scalars, nbody vectors, then scalars up to V.
struct RowSplit {
  int64_t head, nbody, tail_start;
};

template <class T, int kVec>
__device__ __forceinline__ RowSplit split_row(const T* row, int64_t V) {
  int64_t head = 0;
  if constexpr (kVec > 1) {
    const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) % 16);
    head = misalign == 0 ? 0 : (16 - misalign) / static_cast<int64_t>(sizeof(T));
    if (head > V) head = V;
  }
  const int64_t nbody = (V - head) / kVec;
  return {head, nbody, head + nbody * kVec};
}

// Folds values into a running (max m, sum s of exp(v - m)); -inf values add nothing.
template <int N>
__device__ __forceinline__ void online_add(float& m, float& s, const float (&v)[N]) {
  float vmax = v[0];
#pragma unroll
  for (int j = 1; j < N; ++j) vmax = fmaxf(vmax, v[j]);
  const float m_new = fmaxf(m, vmax);
  if (m_new == -INFINITY) return;
  s *= __expf(m - m_new);
#pragma unroll
  for (int j = 0; j < N; ++j) s += __expf(v[j] - m_new);
  m = m_new;
}

template <class T, int kVec>
__global__ void __launch_bounds__(kThreads) cross_entropy_forward_kernel(CrossEntropyForwardParams p) {
  __shared__ float scratch[kWarpSize];
  const int64_t row = blockIdx.x;
  const int32_t target = p.targets[row];
  if (target == p.ignore_index) {
    if (threadIdx.x == 0) p.loss[row] = p.lse[row] = 0.f;
    return;
  }
  const int64_t V = p.vocab;
  const T* x = static_cast<const T*>(p.logits) + row * p.row_stride;  // (V)
  const RowSplit sp = split_row<T, kVec>(x, V);
  float m = -INFINITY, s = 0.f;
  if (threadIdx.x < sp.head) {
    const float v[1] = {to_f32(x[threadIdx.x])};
    online_add(m, s, v);
  }
  const T* body = x + sp.head;
  int64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < sp.nbody; i += kUnroll * kThreads) {
    float v[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_vec<kVec>(body + (i + u * kThreads) * kVec, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) online_add(m, s, v[u]);
  }
  for (; i < sp.nbody; i += kThreads) {
    float v[kVec];
    load_vec<kVec>(body + i * kVec, v);
    online_add(m, s, v);
  }
  if (sp.tail_start + threadIdx.x < V) {
    const float v[1] = {to_f32(x[sp.tail_start + threadIdx.x])};
    online_add(m, s, v);
  }
  const float row_max = block_max(m, scratch);
  const float sum = block_sum(m == -INFINITY ? 0.f : s * __expf(m - row_max), scratch);
  if (threadIdx.x == 0) {
    const float lse = row_max + logf(sum);
    p.lse[row] = lse;
    p.loss[row] = (target >= 0 && target < V) ? lse - to_f32(x[target]) : NAN;
  }
}

template <class T, int kVec>
__global__ void __launch_bounds__(kThreads) cross_entropy_backward_kernel(CrossEntropyBackwardParams p) {
  const int64_t row = blockIdx.x;
  const int32_t target = p.targets[row];
  const int64_t V = p.vocab;
  const T* x = static_cast<const T*>(p.logits) + row * p.row_stride;  // (V)
  T* dx = static_cast<T*>(p.dlogits) + row * p.row_stride;            // (V), same misalignment as x
  const RowSplit sp = split_row<T, kVec>(x, V);
  const T* body = x + sp.head;
  T* dbody = dx + sp.head;
  // Row padding (a head over the padded vocabulary multiplies it): zeros. Elementwise like the
  // rest, so dlogits may be the logits' own memory: each element is read before it is written,
  // by the same thread.
  for (int64_t c = V + threadIdx.x; c < p.zero_to; c += kThreads) dx[c] = from_f32<T>(0.f);
  if (target == p.ignore_index) {  // no gradient: zeros, without reading the logits
    float z[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) z[j] = 0.f;
    if (threadIdx.x < sp.head) dx[threadIdx.x] = from_f32<T>(0.f);
    for (int64_t i = threadIdx.x; i < sp.nbody; i += kThreads) store_vec<kVec>(dbody + i * kVec, z);
    if (sp.tail_start + threadIdx.x < V) dx[sp.tail_start + threadIdx.x] = from_f32<T>(0.f);
    return;
  }
  const float lse = p.lse[row], g = p.dloss[row];
  auto grad = [&](float v, int64_t c) { return (__expf(v - lse) - (c == target ? 1.f : 0.f)) * g; };
  if (threadIdx.x < sp.head) dx[threadIdx.x] = from_f32<T>(grad(to_f32(x[threadIdx.x]), threadIdx.x));
  int64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * kThreads < sp.nbody; i += kUnroll * kThreads) {
    float v[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) load_vec<kVec>(body + (i + u * kThreads) * kVec, v[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c0 = sp.head + (i + u * kThreads) * kVec;
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[u][j] = grad(v[u][j], c0 + j);
      store_vec<kVec>(dbody + (i + u * kThreads) * kVec, v[u]);
    }
  }
  for (; i < sp.nbody; i += kThreads) {
    float v[kVec];
    load_vec<kVec>(body + i * kVec, v);
    const int64_t c0 = sp.head + i * kVec;
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = grad(v[j], c0 + j);
    store_vec<kVec>(dbody + i * kVec, v);
  }
  const int64_t c = sp.tail_start + threadIdx.x;
  if (c < V) dx[c] = from_f32<T>(grad(to_f32(x[c]), c));
}

}  // namespace

void cross_entropy_forward(const CrossEntropyForwardParams& p, Stream stream) {
  if (p.rows == 0) return;
  dispatch_cuda_float(p.dtype, "[cross_entropy_forward]", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_forward_kernel<T, kVecOf<T>><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
    CUDA_CHECK_LAUNCH();
  });
}

void cross_entropy_backward(const CrossEntropyBackwardParams& p, Stream stream) {
  if (p.rows == 0) return;
  dispatch_cuda_float(p.dtype, "[cross_entropy_backward]", [&](auto tag) {
    using T = decltype(tag);
    // Vectors need logits and dlogits rows to share their offset within 16 bytes; fresh
    // contiguous buffers always do, an odd view of the logits may not.
    const bool same_misalign = (reinterpret_cast<uintptr_t>(p.logits) ^ reinterpret_cast<uintptr_t>(p.dlogits)) % 16 == 0;
    if (same_misalign) {
      cross_entropy_backward_kernel<T, kVecOf<T>><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
    } else {
      cross_entropy_backward_kernel<T, 1><<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
