// CPU references for attention, used by tests (no GPU needed).
//
// All arrays are contiguous: q, o, dout, dq (B, T, H, D); k, v, dk, dv (B, T, H_kv, D) with
// H_kv = attention_kv_heads(cfg) (grouped-query attention: query head h reads K/V head
// attention_kv_head(cfg, h); dk, dv sum over the query heads of a group); lse (B, H, T). The
// configuration (B, H, T, D, scale, causal, dropout, block-sparse mask) comes from an
// AttentionParams whose pointers and strides are ignored. Masks and dropout use the same
// attention_allowed / dropout_keep_at functions as the CUDA kernels.
//
// 1. attention_reference_*: float64 naive attention, the ground truth.
// 2. naive_lowp_*: naive attention with the rounding of our CUDA naive kernel (operands rounded
//    to the dtype, fp32 accumulation, P / P o Z / dS rounded), to measure "naive error".
// 3. flash_tiled_*: the flash algorithm itself -- tiles of block_m x block_n, online softmax,
//    skipped empty tiles, recompute from lse in the backward, D = rowsum(dO o O) -- with the
//    rounding of the CUDA flash kernels, so the algorithm is tested without a GPU.
// 2 and 3 with grouped K/V heads form dK, dV as the CUDA path does: each query head's share rounded
// to the dtype, then each group summed in fp32 in head order and rounded once.
#pragma once

#include <functional>
#include <vector>

#include "ops/attention_params.h"

namespace ft::cpu {

// Runs fn(b, h) for every (batch, head) of cfg, spread over the machine's threads.
void for_each_head(const AttentionParams& cfg, const std::function<void(int, int)>& fn);

void attention_reference_forward(const AttentionParams& cfg, const double* q, const double* k,
                                 const double* v, double* o, double* lse);
void attention_reference_backward(const AttentionParams& cfg, const double* q, const double* k,
                                  const double* v, const double* dout, double* dq, double* dk,
                                  double* dv);

// Rounds x to cfg.dtype (bf16 or f16) and back, round to nearest even; kF32 returns x.
float round_to_dtype(AttentionDType dtype, float x);

// Inputs must already be representable in cfg.dtype (round them first); outputs are rounded.
void naive_lowp_forward(const AttentionParams& cfg, const float* q, const float* k, const float* v,
                        float* o, float* lse);
void naive_lowp_backward(const AttentionParams& cfg, const float* q, const float* k,
                         const float* v, const float* dout, float* dq, float* dk, float* dv);

void flash_tiled_forward(const AttentionParams& cfg, int block_m, int block_n, const float* q,
                         const float* k, const float* v, float* o, float* lse);
void flash_tiled_backward(const AttentionParams& cfg, int block_m, int block_n, const float* q,
                          const float* k, const float* v, const float* o, const float* lse,
                          const float* dout, float* dq, float* dk, float* dv);

}  // namespace ft::cpu
