// Scaled dot-product attention, flash (fused, recompute backward) and naive (materialised S and P),
// at the Tensor level: validate, allocate, dispatch. Kernels: ops/cuda/attention/flash_attention.h,
// ops/cuda/naive_attention.h; CPU references: ops/cpu/attention_reference.h.
//
// Layout: q, out, dout, dq are (B, T, H, D) and k, v, dk, dv (B, T, H_kv, D) with any batch, time
// and head strides and a contiguous last dim, so q, k, v (and dq, dk, dv) can be strided slices of
// one fused (B, T, (H + 2 H_kv) D) buffer without a copy. out is returned contiguous (B, T, H, D),
// so it views as (B, T, H D) for free. lse is (B, H, T), contiguous.
//
// Grouped-query attention: H_kv (k's head count) must divide H; query head h reads K/V head
// h / (H / H_kv) (H_kv = H: multi-head attention; H_kv = 1: multi-query attention). dk and dv are
// the sums over each group's query heads: on CUDA the kernels write per-query-head partials into a
// (B, T, H, D) workspace (only allocated when H_kv < H) and a fixed-order fp32 sum folds them, so
// dk, dv stay deterministic.
//
// Dtypes and devices:
//   CUDA: flash: bf16 or f16, D in {64, 128, 256} (cuda_flash_takes_head_dim; its tensor-core
//         mma.sync tiles take 16-bit operands;
//         f32 is refused, pointing at naive). naive: bf16, f16 or f32 (full fp32: cuBLAS f32 GEMMs
//         with CUBLAS_COMPUTE_32F, no TF32), any D. Both: batch/time/head strides multiples of 8
//         elements and base pointers 16-byte aligned (cp.async moves 16-byte rows). lse is f32.
//   CPU:  f32, f64, bf16 or f16; any D; any strides. f32 and f64 run the float64 reference (both
//         "flash" and "naive": the CPU tiled and low-precision references round to bf16/f16 by
//         construction, which an f32 or f64 op must not do); bf16 and f16 run the references that
//         reproduce the CUDA kernels' rounding -- the tiled flash algorithm for flash, the
//         low-precision naive for naive. lse has q's dtype for f32/f64 and is f32 for bf16/f16.
//
// Randomness: dropout on P draws its mask from opts.philox at slice b * H + h, h the query head
// (core/dropout_mask.h; grouping K/V heads does not change the mask),
// so one call consumes attention_philox_offsets(B, H) offsets; the backward regenerates the mask
// from the same state. Flash and naive draw identical masks.
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "core/tensor.h"

namespace ft::ops {

struct AttentionOptions {
  bool causal = true;
  float dropout_p = 0.f;      // on the normalised probabilities, in [0, 1]
  PhiloxState philox;         // where the dropout mask starts (unused when dropout_p == 0)
  float softmax_scale = 0.f;  // 0 means 1 / sqrt(D)
  // Block-sparse mode (attention_params.h): block_size 0 is dense. Otherwise key block kb is
  // visible from query block qb iff qb - window_blocks < kb <= qb or kb < global_blocks.
  int block_size = 0;
  int window_blocks = 0;  // >= 1 when block_size > 0: every query block sees itself
  int global_blocks = 0;
  // Flash backward on CUDA: true makes dq bit-identical for identical inputs (the key blocks add
  // into dQ in one fixed order: a dQ kernel of its own, or per-tile counters; flash_attention.h);
  // false adds with fp32 atomics in
  // arrival order (dq reproducible to rounding only). dk, dv, out and the CPU paths are always
  // deterministic; naive ignores it. Cost on an H200: bench/attention/NOTES.md.
  bool deterministic = false;
  // Document mask (attention_params.h); undefined = off. (B, T) int32, contiguous, on q's device:
  // doc_start[b, t] is the first position of the document holding position t of row b
  // (ops/document_mask.h computes it from tokens), and query t sees key s only when
  // s >= doc_start[b, t]. Needs causal (a key after the document would need its end as well).
  // Contract: 0 <= doc_start[b, t] <= t and non-decreasing in t (the flash kernels skip tiles by
  // it). Checked in full on the CPU; on CUDA only the shape, dtype and device (a check would
  // cost a device sync per call), so a GPU caller must pass what document_starts made.
  Tensor doc_start;
};

// The head dims the CUDA flash kernels are built for (one translation unit each,
// ops/cuda/attention/flash_{fwd,bwd}_hdim*.cu); naive attention and the CPU take any D.
inline constexpr const char* kCudaFlashHeadDims = "64, 128 and 256";
inline constexpr bool cuda_flash_takes_head_dim(int64_t D) { return D == 64 || D == 128 || D == 256; }

// Philox offsets one attention call consumes: one per (batch, head) slice.
inline uint64_t attention_philox_offsets(int64_t B, int64_t H) { return static_cast<uint64_t>(B * H); }

struct AttentionForward {
  Tensor out;    // (B, T, H, D) contiguous, q's dtype
  Tensor lse;    // (B, H, T) natural-log log-sum-exp of the scaled, masked scores (before dropout)
  Tensor probs;  // naive on CUDA only: (B, H, T, T) undropped P, q's dtype (f32 for f32), which the naive
                 // backward reads; undefined for flash and on the CPU (the references recompute P)
};

AttentionForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionOptions& opts);
// Writes the gradients into dq (B, T, H, D), dk, dv (B, T, H_kv, D) (given, q's dtype; they may be
// strided slices of one dqkv buffer). out and lse are the forward's; opts must equal the forward's.
// On CUDA dq is accumulated with fp32 atomics: reproducible to rounding only unless
// opts.deterministic (dk, dv are always exact).
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout, const AttentionOptions& opts,
                              const Tensor& dq, const Tensor& dk, const Tensor& dv);

AttentionForward naive_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionOptions& opts);
// As flash_attention_backward; `fwd` is what naive_attention_forward returned (its probs on CUDA).
void naive_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const AttentionForward& fwd, const Tensor& dout,
                              const AttentionOptions& opts, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv);

}  // namespace ft::ops
