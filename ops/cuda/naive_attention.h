// Naive (unfused) attention: the honest baseline that materialises the T x T matrices.
//
// Forward:  S = Q K^T (cuBLAS, fp32 out) -> row softmax with the same causal / block mask as flash
//           -> P (input dtype, undropped, kept for backward) and P o Z (Z = dropout keep *
//           keep_scale, the same Philox mask function as flash) -> O = (P o Z) V (cuBLAS).
// Backward: dP = dO V^T (fp32) -> row kernel: dS = P o (dP o Z - rowsum(P o dP o Z)), P o Z
//           -> dV = (P o Z)^T dO, dQ = scale dS K, dK = scale dS^T Q (cuBLAS).
// Precision: matmul operands in the input dtype with fp32 accumulation (as in flash); S and dP are
// stored in fp32 so the softmax and its gradient see unrounded scores (rounding S to bf16 would
// add ~0.4% relative error to every logit, an unfair handicap); P, P o Z and dS are stored in the
// input dtype because they are matmul operands, exactly as flash rounds P and dS before its mma.
// Dtypes: bf16, f16 and f32 (mixed_precision: fp32 on a GPU). f32 is full fp32 throughout: f32
// GEMM operands with CUBLAS_COMPUTE_32F and no TF32, P / P o Z / dS stored in f32, lse f32. Flash
// has no f32 twin: its tiles are mma.sync m16n8k16 tensor-core products, which take 16-bit operands.
// All GEMMs are strided-batched over heads, one call per batch index (q, k, v may be strided
// slices of a fused qkv buffer, so (b, h) is not one stride). Grouped K/V heads (p.H_kv < p.H): the
// products that read K or V take one call per (batch index, K/V head), batched over its query heads
// with a zero K/V stride; p.dk, p.dv receive per-query-head partials (B, T, H, D), which the front
// door sums (attention_kv_sum.h).
#pragma once

#include <cstdint>

#include "core/stream.h"
#include "ops/attention_params.h"

struct cublasContext;
typedef struct cublasContext* cublasHandle_t;

namespace ft::cuda {

// Caller-owned buffers, each (B, H, T, T).
struct NaiveAttentionBuffers {
  float* scores = nullptr;         // fp32: S in forward, dP in backward (scratch)
  void* probs = nullptr;           // input dtype (bf16, f16 or f32): P, written by forward, read by backward
  void* probs_dropped = nullptr;   // input dtype: P o Z (scratch; = P and unused if no dropout)
  void* dscores = nullptr;         // input dtype: dS (backward scratch)
};
inline int64_t naive_attention_matrix_elements(const AttentionParams& p) {
  return static_cast<int64_t>(p.B) * p.H * p.T * p.T;
}

// Writes p.o and p.lse; leaves P in buf.probs for the backward.
void naive_attention_forward(const AttentionParams& p, const NaiveAttentionBuffers& buf,
                             cublasHandle_t handle, Stream stream);
// Writes p.dq, p.dk, p.dv from p.dout, q, k, v and buf.probs (of the forward with the same p).
void naive_attention_backward(const AttentionParams& p, const NaiveAttentionBuffers& buf,
                              cublasHandle_t handle, Stream stream);

}  // namespace ft::cuda
