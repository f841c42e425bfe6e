// dK and dV of grouped-query attention: the sum over the query heads that share each K/V head.
//
// The attention backward kernels (flash and naive) compute one dK, dV per query head; with
// H_kv < H the front door (ops/attention.cpp) points them at a contiguous (B, T, H, D) workspace
// and this kernel folds it into the caller's dk, dv: out[b, t, hk, :] = sum over g in [0, H / H_kv)
// of partial[b, t, hk * (H / H_kv) + g, :], added in fp32 in head order and rounded once to the
// dtype. The fixed order makes it deterministic; the CPU references do the same sum
// (ops/cpu/attention_reference.cpp, KvGradients), so bf16 results match them bit for bit.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct AttentionKvSumParams {
  const void* partial = nullptr;  // (B, T, H, D) contiguous
  void* out = nullptr;            // (B, T, H_kv, D), strides below, last dim contiguous
  int64_t out_batch_stride = 0, out_row_stride = 0, out_head_stride = 0;
  int B = 0, T = 0, H = 0, H_kv = 0, D = 0;
  DType dtype = DType::BF16;  // of partial and out: f32, bf16 or f16
};

FT_CUDA_LAUNCHER(void attention_kv_sum(const AttentionKvSumParams& p, Stream stream));

}  // namespace ft::cuda
