// Naive attention: cuBLAS strided-batched GEMMs around two row kernels. See naive_attention.h.
#include "ops/cuda/naive_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>

#include "core/cuda/check.h"
#include "core/dropout_mask.h"
#include "core/error.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kRowThreads = 256;

// Elements of P, P o Z and dS: T is float, __nv_bfloat16 or __half (dtype_dispatch.cuh's to_f32 /
// from_f32 are the same round-to-nearest conversions the 16-bit kernels always used, so their bits
// are unchanged by the templating).
template <class T>
__device__ __forceinline__ float load_elem(const void* base, int64_t i) {
  return to_f32(static_cast<const T*>(base)[i]);
}
template <class T>
__device__ __forceinline__ void store_elem(void* base, int64_t i, float x) {
  static_cast<T*>(base)[i] = from_f32<T>(x);
}

// Block-wide reduction of (max, sum of exp relative to max) pairs.
__device__ void block_reduce_max_sum(float& m, float& l) {
  __shared__ float sm[32], sl[32];
  for (int off = 16; off > 0; off /= 2) {
    const float om = __shfl_xor_sync(0xffffffffu, m, off), ol = __shfl_xor_sync(0xffffffffu, l, off);
    const float nm = fmaxf(m, om);
    l = (m == -INFINITY ? 0.f : l * __expf(m - nm)) + (om == -INFINITY ? 0.f : ol * __expf(om - nm));
    m = nm;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  if (lane == 0) sm[warp] = m, sl[warp] = l;
  __syncthreads();
  m = -INFINITY;
  l = 0.f;
  for (int w = 0; w < nwarps; ++w) {
    const float nm = fmaxf(m, sm[w]);
    l = (m == -INFINITY ? 0.f : l * __expf(m - nm)) + (sm[w] == -INFINITY ? 0.f : sl[w] * __expf(sm[w] - nm));
    m = nm;
  }
}

__device__ float block_reduce_sum(float x) {
  __shared__ float s[32];
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
  if (lane == 0) s[warp] = x;
  __syncthreads();
  x = 0.f;
  for (int w = 0; w < nwarps; ++w) x += s[w];
  return x;
}

// The dropout mask's Philox call g of a row covers four of its columns (core/dropout_mask.h):
// 16 (g / 4) + 2 (g % 4) + {0, 1, 8, 9}; the other four pieces of the call are row i +- 8's.
__device__ __forceinline__ int call_col(int g, int k) { return 16 * (g >> 2) + 2 * (g & 3) + (k & 1) + 8 * (k >> 1); }

// One CTA per row (bh, i) of S: masked softmax of scale * S -> P, P o Z, lse. The dropout loop
// walks the row's Philox calls (call_col), one call per four columns.
template <class Elem, bool kDropout>
__global__ void naive_softmax_fwd_kernel(const AttentionParams p, const float* scores, void* probs,
                                         void* probs_dropped) {
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: the offset is in device memory
  const int64_t row_id = blockIdx.x;
  const int T = p.T, i = static_cast<int>(row_id % T);
  const int64_t bh = row_id / T;
  const int b = static_cast<int>(bh / p.H);
  const float* s = scores + row_id * T;
  const int groups = (T + 7) / 8, call_groups = 4 * ((T + 15) / 16);
  float m = -INFINITY, l = 0.f;
  for (int g = threadIdx.x; g < groups; g += blockDim.x)
    for (int j = 8 * g; j < min(8 * g + 8, T); ++j) {
      if (!attention_allowed(p, b, i, j)) continue;
      const float x = s[j] * p.softmax_scale;
      const float nm = fmaxf(m, x);
      l = (m == -INFINITY ? 0.f : l * __expf(m - nm)) + __expf(x - nm);
      m = nm;
    }
  block_reduce_max_sum(m, l);
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int g = threadIdx.x; g < call_groups; g += blockDim.x) {
    PhiloxBits bits{};
    if constexpr (kDropout) bits = dropout_bits(drop, bh, dropout_row_pair(i), g);
    for (int k = 0; k < 4; ++k) {
      const int j = call_col(g, k);
      if (j >= T) continue;
      const float pj = attention_allowed(p, b, i, j) ? __expf(s[j] * p.softmax_scale - m) * inv : 0.f;
      store_elem<Elem>(probs, row_id * T + j, pj);
      if constexpr (kDropout)
        store_elem<Elem>(probs_dropped, row_id * T + j,
                         dropout_keep(bits, i, j, p.dropout.threshold) ? pj * p.dropout.keep_scale : 0.f);
    }
  }
  if (threadIdx.x == 0) p.lse[row_id] = l > 0.f ? m + logf(l) : -INFINITY;
}

// One CTA per row: dS = P o (dP o Z - sum_j P dP Z) and P o Z, from dP (fp32) and the saved P.
template <class Elem, bool kDropout>
__global__ void naive_softmax_bwd_kernel(const AttentionParams p, const float* dprobs,
                                         const void* probs, void* probs_dropped, void* dscores) {
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: the offset is in device memory
  const int64_t row_id = blockIdx.x;
  const int T = p.T, i = static_cast<int>(row_id % T);
  const int64_t bh = row_id / T;
  const float* dp = dprobs + row_id * T;
  const int call_groups = 4 * ((T + 15) / 16);
  const float keep_scale = kDropout ? p.dropout.keep_scale : 1.f;
  float dot = 0.f;
  for (int g = threadIdx.x; g < call_groups; g += blockDim.x) {
    PhiloxBits bits{};
    if constexpr (kDropout) bits = dropout_bits(drop, bh, dropout_row_pair(i), g);
    for (int k = 0; k < 4; ++k) {
      const int j = call_col(g, k);
      if (j >= T) continue;
      float z = keep_scale;
      if constexpr (kDropout) z = dropout_keep(bits, i, j, p.dropout.threshold) ? keep_scale : 0.f;
      dot += load_elem<Elem>(probs, row_id * T + j) * dp[j] * z;
    }
  }
  dot = block_reduce_sum(dot);
  for (int g = threadIdx.x; g < call_groups; g += blockDim.x) {
    PhiloxBits bits{};
    if constexpr (kDropout) bits = dropout_bits(drop, bh, dropout_row_pair(i), g);
    for (int k = 0; k < 4; ++k) {
      const int j = call_col(g, k);
      if (j >= T) continue;
      float z = keep_scale;
      if constexpr (kDropout) z = dropout_keep(bits, i, j, p.dropout.threshold) ? keep_scale : 0.f;
      const float pj = load_elem<Elem>(probs, row_id * T + j);
      store_elem<Elem>(dscores, row_id * T + j, pj * (dp[j] * z - dot));
      if constexpr (kDropout) store_elem<Elem>(probs_dropped, row_id * T + j, pj * z);
    }
  }
}

// C = alpha * op(A) op(B) for each head of batch index b (column-major view, see naive_attention.h).
// CUBLAS_COMPUTE_32F: fp32 accumulation for every dtype. With f32 operands it is full fp32 (fp32
// products and sums, no TF32): TF32 would need CUBLAS_COMPUTE_32F_FAST_TF32 or the handle's
// CUBLAS_TF32_TENSOR_OP_MATH mode, and the context's handle keeps the default math mode.
// A is K or V where `a_per_kv_head`: with grouped K/V heads (H_kv < H) one call per K/V head, its
// H / H_kv query heads batched against that one A (stride 0); multi-head attention keeps one call.
struct Operand {
  const void* ptr;
  int64_t ld, head_stride;
  cudaDataType_t type;
};
int type_bytes(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }
void gemm_heads(cublasHandle_t handle, const AttentionParams& p, cublasOperation_t opa,
                cublasOperation_t opb, int m, int n, int k, float alpha, Operand a, Operand b,
                void* c, int64_t ldc, int64_t c_head_stride, cudaDataType_t ctype,
                bool a_per_kv_head = false) {
  const float beta = 0.f;
  const int group = a_per_kv_head ? attention_group_size(p) : 1;
  const int calls = group == 1 ? 1 : p.H / group;  // K/V heads
  const int batch = p.H / calls;                  // query heads per call
  for (int i = 0; i < calls; ++i) {
    const char* ai = static_cast<const char*>(a.ptr) + i * a.head_stride * type_bytes(a.type);
    const char* bi = static_cast<const char*>(b.ptr) + i * batch * b.head_stride * type_bytes(b.type);
    char* ci = static_cast<char*>(c) + i * batch * c_head_stride * type_bytes(ctype);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, opa, opb, m, n, k, &alpha, ai, a.type, a.ld,
                                            group == 1 ? a.head_stride : 0, bi, b.type, b.ld, b.head_stride,
                                            &beta, ci, ctype, ldc, c_head_stride, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT));
  }
}

const char* offset(const void* base, int64_t elements, int elem_bytes) {
  return static_cast<const char*>(base) + elements * elem_bytes;
}

// The cuBLAS type and byte size of q, k, v, o, P, P o Z and dS; S and dP are always fp32.
cudaDataType_t cuda_type(AttentionDType t) {
  switch (t) {
    case AttentionDType::kBF16: return CUDA_R_16BF;
    case AttentionDType::kF16: return CUDA_R_16F;
    case AttentionDType::kF32: return CUDA_R_32F;
  }
  throw Error(str("[naive_attention] unknown dtype ", static_cast<int>(t)));
}
int elem_bytes(AttentionDType t) { return t == AttentionDType::kF32 ? 4 : 2; }

// Calls f(Elem{}) with Elem = __nv_bfloat16, __half or float for p.dtype.
template <class F>
void dispatch_elem(AttentionDType t, F&& f) {
  switch (t) {
    case AttentionDType::kBF16: f(__nv_bfloat16{}); return;
    case AttentionDType::kF16: f(__half{}); return;
    case AttentionDType::kF32: f(float{}); return;
  }
  throw Error(str("[naive_attention] unknown dtype ", static_cast<int>(t)));
}

}  // namespace

void naive_attention_forward(const AttentionParams& p, const NaiveAttentionBuffers& buf,
                             cublasHandle_t handle, Stream stream) {
  const cudaDataType_t dt = cuda_type(p.dtype);
  const int eb = elem_bytes(p.dtype);
  const bool dropout = p.dropout.threshold != 0;
  const int64_t TT = static_cast<int64_t>(p.T) * p.T;
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  for (int b = 0; b < p.B; ++b) {  // S = Q K^T (fp32)
    gemm_heads(handle, p, CUBLAS_OP_T, CUBLAS_OP_N, p.T, p.T, p.D, 1.f,
               {offset(p.k, b * p.k_batch_stride, eb), p.k_row_stride, p.k_head_stride, dt},
               {offset(p.q, b * p.q_batch_stride, eb), p.q_row_stride, p.q_head_stride, dt},
               buf.scores + b * p.H * TT, p.T, TT, CUDA_R_32F, true);
  }
  const unsigned rows = static_cast<unsigned>(static_cast<int64_t>(p.B) * p.H * p.T);
  auto launch = [&](auto kernel) {
    kernel<<<rows, kRowThreads, 0, stream>>>(p, buf.scores, buf.probs, buf.probs_dropped);
    CUDA_CHECK_LAUNCH();
  };
  dispatch_elem(p.dtype, [&](auto tag) {
    using Elem = decltype(tag);
    dropout ? launch(naive_softmax_fwd_kernel<Elem, true>) : launch(naive_softmax_fwd_kernel<Elem, false>);
  });
  const void* pv = dropout ? buf.probs_dropped : buf.probs;
  for (int b = 0; b < p.B; ++b) {  // O = (P o Z) V
    gemm_heads(handle, p, CUBLAS_OP_N, CUBLAS_OP_N, p.D, p.T, p.T, 1.f,
               {offset(p.v, b * p.v_batch_stride, eb), p.v_row_stride, p.v_head_stride, dt},
               {offset(pv, b * p.H * TT, eb), p.T, TT, dt},
               const_cast<char*>(offset(p.o, b * p.o_batch_stride, eb)), p.o_row_stride,
               p.o_head_stride, dt, true);
  }
}

void naive_attention_backward(const AttentionParams& p, const NaiveAttentionBuffers& buf,
                              cublasHandle_t handle, Stream stream) {
  const cudaDataType_t dt = cuda_type(p.dtype);
  const int eb = elem_bytes(p.dtype);
  const bool dropout = p.dropout.threshold != 0;
  const int64_t TT = static_cast<int64_t>(p.T) * p.T;
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  for (int b = 0; b < p.B; ++b) {  // dP = dO V^T (fp32)
    gemm_heads(handle, p, CUBLAS_OP_T, CUBLAS_OP_N, p.T, p.T, p.D, 1.f,
               {offset(p.v, b * p.v_batch_stride, eb), p.v_row_stride, p.v_head_stride, dt},
               {offset(p.dout, b * p.do_batch_stride, eb), p.do_row_stride, p.do_head_stride, dt},
               buf.scores + b * p.H * TT, p.T, TT, CUDA_R_32F, true);
  }
  const unsigned rows = static_cast<unsigned>(static_cast<int64_t>(p.B) * p.H * p.T);
  auto launch = [&](auto kernel) {
    kernel<<<rows, kRowThreads, 0, stream>>>(p, buf.scores, buf.probs, buf.probs_dropped, buf.dscores);
    CUDA_CHECK_LAUNCH();
  };
  dispatch_elem(p.dtype, [&](auto tag) {
    using Elem = decltype(tag);
    dropout ? launch(naive_softmax_bwd_kernel<Elem, true>) : launch(naive_softmax_bwd_kernel<Elem, false>);
  });
  const void* pz = dropout ? buf.probs_dropped : buf.probs;
  for (int b = 0; b < p.B; ++b) {
    const Operand ds{offset(buf.dscores, b * p.H * TT, eb), p.T, TT, dt};
    // dV = (P o Z)^T dO
    gemm_heads(handle, p, CUBLAS_OP_N, CUBLAS_OP_T, p.D, p.T, p.T, 1.f,
               {offset(p.dout, b * p.do_batch_stride, eb), p.do_row_stride, p.do_head_stride, dt},
               {offset(pz, b * p.H * TT, eb), p.T, TT, dt},
               const_cast<char*>(offset(p.dv, b * p.dv_batch_stride, eb)), p.dv_row_stride,
               p.dv_head_stride, dt);
    // dQ = scale dS K
    gemm_heads(handle, p, CUBLAS_OP_N, CUBLAS_OP_N, p.D, p.T, p.T, p.softmax_scale,
               {offset(p.k, b * p.k_batch_stride, eb), p.k_row_stride, p.k_head_stride, dt}, ds,
               const_cast<char*>(offset(p.dq, b * p.dq_batch_stride, eb)), p.dq_row_stride,
               p.dq_head_stride, dt, true);
    // dK = scale dS^T Q
    gemm_heads(handle, p, CUBLAS_OP_N, CUBLAS_OP_T, p.D, p.T, p.T, p.softmax_scale,
               {offset(p.q, b * p.q_batch_stride, eb), p.q_row_stride, p.q_head_stride, dt}, ds,
               const_cast<char*>(offset(p.dk, b * p.dk_batch_stride, eb)), p.dk_row_stride,
               p.dk_head_stride, dt);
  }
}

}  // namespace ft::cuda
