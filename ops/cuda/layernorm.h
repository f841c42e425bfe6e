// CUDA layernorm over the last axis: plain-old-data arguments and launchers (no CUDA headers).
//
// x, y, dy, dx are (N, C) contiguous in `dtype` (bf16, f16 or f32); weight and bias are (C) in
// `param_dtype`: the same dtype, or f32 under bf16 / f16 (fp32 LayerNorm parameters); mean, rstd
// are (N) fp32; dweight, dbias are (C) fp32 and are overwritten (they are sums over all N rows,
// reduced in a fixed order, so the result is deterministic).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct LayerNormForwardParams {
  const void* x = nullptr;       // (N, C)
  const void* weight = nullptr;  // (C)
  const void* bias = nullptr;    // (C)
  void* y = nullptr;             // (N, C)
  float* mean = nullptr;         // (N)
  float* rstd = nullptr;         // (N)
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  DType dtype = DType::BF16;
  DType param_dtype = DType::BF16;  // weight and bias: dtype, or f32
};

struct LayerNormBackwardParams {
  const void* dy = nullptr;      // (N, C)
  const void* x = nullptr;       // (N, C)
  const void* weight = nullptr;  // (C)
  const float* mean = nullptr;   // (N)
  const float* rstd = nullptr;   // (N)
  void* dx = nullptr;            // (N, C)
  float* dweight = nullptr;      // (C)
  float* dbias = nullptr;        // (C)
  bool add_dweight = false, add_dbias = false;  // add the sums into dweight / dbias (+=) instead of storing
  int64_t rows = 0, cols = 0;
  DType dtype = DType::BF16;
  DType param_dtype = DType::BF16;  // weight: dtype, or f32
  int device = 0;  // where the launcher takes its (blocks, 2, C) fp32 partial-sum scratch
};

FT_CUDA_LAUNCHER(void layernorm_forward(const LayerNormForwardParams& p, Stream stream));
FT_CUDA_LAUNCHER(void layernorm_backward(const LayerNormBackwardParams& p, Stream stream));

}  // namespace ft::cuda
