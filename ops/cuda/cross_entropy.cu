// CUDA cross-entropy fused with log-softmax over the vocabulary, fp32 math.
//
// One block per row. The forward reads the row once with an online max/sum (each thread keeps
// its own (max, sum of exp(x - max)) and the block combines them), so lse costs one pass over
// the logits; the target logit is one extra scalar load. The backward reads the row once and
// writes dlogits once: softmax is recomputed as exp(x - lse), so no (N, V) probabilities buffer
// exists. Contiguous rows of V = 50257 mostly start off a 16-byte boundary, so each row is walked
// as a scalar head up to the first boundary, a body of 16-byte vectors and a scalar tail (the
// GPT head's padded rows, MatmulOptions::align_rows, all start on one). The training head's
// one-pass kernel (loss and dlogits together, cross_entropy_loss_and_grad) is at the end.
#include "ops/cuda/cross_entropy.h"

#include "core/cuda/check.h"
#include "ops/cuda/fast_exp2.cuh"
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

// ---- The loss and its gradient in one pass (the training head) ----
//
// One block of 1024 threads per row, two blocks per SM: at most 2 x 132 rows (26 MB of bf16
// rows of V = 50264 on an H100) are in flight, well inside the 50 MB L2. Pass 1 reads the row
// from memory (online max and sum, as the forward kernel) BACK TO FRONT, so the row's start is
// what was read last; pass 2 reads it again FRONT TO BACK -- from L2, beginning with the freshest
// lines -- and writes dlogits over it. Pass 2's loads and all stores are streaming
// (evict-first): neither is read again, and they should not push out the rows other blocks are
// between their passes on. Blocks take rows last first: the head's product wrote those last, so
// they are the likeliest to be in L2 already. Each row thus costs one read and one write of
// memory: the copy ceiling.

constexpr int kFusedThreads = 1024;

template <class T, int kVec>
__device__ __forceinline__ void load_vec_streaming(const T* p, float (&out)[kVec]) {
  static_assert(sizeof(T) * kVec == 16, "one 16-byte vector");
  const uint4 bits = __ldcs(reinterpret_cast<const uint4*>(p));
  Vec<T, kVec> v;
  memcpy(&v, &bits, 16);
#pragma unroll
  for (int j = 0; j < kVec; ++j) out[j] = to_f32(v.v[j]);
}

template <class T, int kVec>
__device__ __forceinline__ void store_vec_streaming(T* p, const float (&in)[kVec]) {
  static_assert(sizeof(T) * kVec == 16, "one 16-byte vector");
  Vec<T, kVec> v;
#pragma unroll
  for (int j = 0; j < kVec; ++j) v.v[j] = from_f32<T>(in[j]);
  uint4 bits;
  memcpy(&bits, &v, 16);
  __stcs(reinterpret_cast<uint4*>(p), bits);
}

// Folds values into a running (max m, sum s of e^(v - m)), each term one FFMA and one MUFU:
// e^(v - m) = 2^(v log2e - m log2e). s is rescaled only when the max moves.
template <int N>
__device__ __forceinline__ void online_add_log2(float& m, float& s, const float (&v)[N]) {
  float vmax = v[0];
#pragma unroll
  for (int j = 1; j < N; ++j) vmax = fmaxf(vmax, v[j]);
  if (vmax > m) {
    s *= fast_exp2((m - vmax) * kLog2e);  // m = -inf: s is 0 and stays 0
    m = vmax;
  }
  if (m == -INFINITY) return;  // every value so far -inf
  const float m_log2 = m * kLog2e;
#pragma unroll
  for (int j = 0; j < N; ++j) s += fast_exp2(fmaf(v[j], kLog2e, -m_log2));
}

// Pass 2's body: dlogits = softmax * g over the row's vectors, streaming, in place of the loaded
// values. kFold puts g into the exponent (g > 0: 2^(v log2e - (lse log2e - log2 g)), one FFMA and
// one MUFU an element); the target's element, found by its vector's index (a compare a vector, not
// an element), then loses g: softmax g - g.
template <bool kFold, class T, int kVec>
__device__ __forceinline__ void dlogits_body(T* body, int nbody, int head, int target, float lse_log2, float g) {
  const float bias = kFold ? lse_log2 - __log2f(g) : lse_log2;
  const int target_vec = target >= head ? (target - head) / kVec : -1;
  auto one = [&](int i, float (&v)[kVec]) {  // v: vector i's logits -> its dlogits, stored
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float e = fast_exp2(fmaf(v[j], kLog2e, -bias));  // softmax g when folded, else softmax
      v[j] = kFold ? e : e * g;
    }
    if (i == target_vec) {
      const int jt = target - head - i * kVec;
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        if (j == jt) v[j] -= g;
    }
    store_vec_streaming<T, kVec>(body + static_cast<int64_t>(i) * kVec, v);
  };
  // Two vectors in flight a thread, both loaded before either is stored.
  int i = threadIdx.x;
  for (; i + kFusedThreads < nbody; i += 2 * kFusedThreads) {
    float a[kVec], b[kVec];
    load_vec_streaming<T, kVec>(body + static_cast<int64_t>(i) * kVec, a);
    load_vec_streaming<T, kVec>(body + static_cast<int64_t>(i + kFusedThreads) * kVec, b);
    one(i, a);
    one(i + kFusedThreads, b);
  }
  if (i < nbody) {
    float v[kVec];
    load_vec_streaming<T, kVec>(body + static_cast<int64_t>(i) * kVec, v);
    one(i, v);
  }
}

// The fused kernel's instruction diet (ncu, session 37: at 80% of issue slots with DRAM at 50%, 32
// instructions an element): FFMAs into 2^x in both passes, g folded into the exponent, the target
// found once a vector instead of a 64-bit compare an element, 32-bit indices within the row. A
// GPT-2-small chunk of 4096 rows: 331 -> 279 us under ncu; the training step 0.85% faster. Two
// vectors in flight a thread in both passes (session 38): 279 -> 253-259 us, the step +0.3%.
template <class T, int kVec>
__global__ void __launch_bounds__(kFusedThreads, 2) cross_entropy_loss_and_grad_kernel(CrossEntropyLossGradParams p) {
  __shared__ float scratch[kWarpSize];
  const int64_t row = p.rows - 1 - blockIdx.x;  // last rows first (above)
  const int32_t target = p.targets[row];
  const int64_t V = p.vocab;
  T* x = static_cast<T*>(p.logits) + row * p.row_stride;  // (V): logits, then dlogits
  const RowSplit sp = split_row<T, kVec>(x, V);
  T* body = x + sp.head;
  const int nbody = static_cast<int>(sp.nbody), head = static_cast<int>(sp.head);
  // Row padding (the head's backward products run over the padded vocabulary): zeros.
  for (int64_t c = V + threadIdx.x; c < p.zero_to; c += kFusedThreads) x[c] = from_f32<T>(0.f);
  if (target == p.ignore_index) {  // loss 0 and no gradient: zeros, without reading the logits
    float z[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) z[j] = 0.f;
    if (threadIdx.x < sp.head) x[threadIdx.x] = from_f32<T>(0.f);
    for (int i = threadIdx.x; i < nbody; i += kFusedThreads) store_vec_streaming<T, kVec>(body + static_cast<int64_t>(i) * kVec, z);
    if (sp.tail_start + threadIdx.x < V) x[sp.tail_start + threadIdx.x] = from_f32<T>(0.f);
    if (threadIdx.x == 0) p.loss[row] = 0.f;
    return;
  }
  const bool in_range = target >= 0 && target < V;
  // Read before the barriers of the reductions below, hence before pass 2 overwrites it.
  const float target_logit = threadIdx.x == 0 && in_range ? to_f32(x[target]) : 0.f;

  // Pass 1, back to front: the tail, the body's vectors, the head.
  float m = -INFINITY, s = 0.f;
  if (sp.tail_start + threadIdx.x < V) {
    const float v[1] = {to_f32(x[sp.tail_start + threadIdx.x])};
    online_add_log2(m, s, v);
  }
  // Two vectors in flight a thread (i, then i - kFusedThreads: the order of the one-at-a-time loop,
  // so the same sums): with one, the pass waited on memory at 2.85 TB/s.
  int i = nbody - 1 - static_cast<int>(threadIdx.x);
  for (; i >= kFusedThreads; i -= 2 * kFusedThreads) {
    const Vec<T, kVec> a = load_raw<T, kVec>(body + static_cast<int64_t>(i) * kVec);
    const Vec<T, kVec> b = load_raw<T, kVec>(body + static_cast<int64_t>(i - kFusedThreads) * kVec);
    float v[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = to_f32(a.v[j]);
    online_add_log2(m, s, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = to_f32(b.v[j]);
    online_add_log2(m, s, v);
  }
  if (i >= 0) {
    float v[kVec];
    load_vec<kVec>(body + static_cast<int64_t>(i) * kVec, v);
    online_add_log2(m, s, v);
  }
  if (threadIdx.x < sp.head) {
    const float v[1] = {to_f32(x[threadIdx.x])};
    online_add_log2(m, s, v);
  }
  const float row_max = block_max(m, scratch);
  const float sum = block_sum(m == -INFINITY ? 0.f : s * fast_exp2((m - row_max) * kLog2e), scratch);
  const float lse = row_max + logf(sum);
  if (threadIdx.x == 0) p.loss[row] = in_range ? lse - target_logit : NAN;

  // Pass 2, front to back: dlogits over the logits, each element read and then written by the
  // same thread.
  const float g = (p.grad_scale ? *p.grad_scale : 1.f) * p.row_scale;
  const float lse_log2 = lse * kLog2e;
  auto grad = [&](float v, int64_t c) { return (fast_exp2(fmaf(v, kLog2e, -lse_log2)) - (c == target ? 1.f : 0.f)) * g; };
  if (threadIdx.x < sp.head) x[threadIdx.x] = from_f32<T>(grad(to_f32(x[threadIdx.x]), threadIdx.x));
  const int64_t c = sp.tail_start + threadIdx.x;  // the tail before the body: nothing stays live past it
  if (c < V) x[c] = from_f32<T>(grad(to_f32(x[c]), c));
  const int body_target = in_range && target < sp.tail_start ? target : -1;
  if (g > 0.f && g < INFINITY) {
    dlogits_body<true, T, kVec>(body, nbody, head, body_target, lse_log2, g);
  } else {
    dlogits_body<false, T, kVec>(body, nbody, head, body_target, lse_log2, g);
  }
}

__global__ void scalar_ratio_kernel(const float* a, const float* b, float* out) { *out = *a / *b; }

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

void cross_entropy_loss_and_grad(const CrossEntropyLossGradParams& p, Stream stream) {
  if (p.rows == 0) return;
  FT_CHECK_ARG(p.rows <= INT32_MAX, "[cross_entropy_loss_and_grad] ", p.rows, " rows exceed one grid");
  FT_CHECK_ARG(p.vocab <= INT32_MAX, "[cross_entropy_loss_and_grad] a vocabulary of ", p.vocab,
               " exceeds the kernel's 32-bit indices within a row");
  dispatch_cuda_float(p.dtype, "[cross_entropy_loss_and_grad]", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_loss_and_grad_kernel<T, kVecOf<T>>
        <<<static_cast<unsigned>(p.rows), kFusedThreads, 0, stream>>>(p);
    CUDA_CHECK_LAUNCH();
  });
}

void scalar_ratio(const float* a, const float* b, float* out, Stream stream) {
  scalar_ratio_kernel<<<1, 1, 0, stream>>>(a, b, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
