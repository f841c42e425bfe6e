// CUDA launchers of the residual add fused with LayerNorm (see ops/residual_layernorm.h):
// plain-old-data arguments, no CUDA headers.
//
// Every (N, C) buffer is contiguous in `dtype` (bf16, f16 or f32); weight and bias (C) in
// `param_dtype`: the same dtype, or f32 under bf16 / f16; mean, rstd (N) fp32; dweight, dbias (C)
// fp32, overwritten with sums over all rows in a fixed order (deterministic for a given device and
// shape). `dropout` false: no mask (p = 0), and neither `mask` nor dh is used. h_bias (C), in
// `dtype`, optional: the branch's bias, added to h (and rounded) before the dropout; its gradient
// dh_bias (C) fp32 is the sum of dh's rows, in the same order as dweight's.
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct ResidualLayerNormForwardParams {
  const void* x = nullptr;       // (N, C)
  const void* h = nullptr;       // (N, C)
  const void* weight = nullptr;  // (C)
  const void* bias = nullptr;    // (C)
  const void* h_bias = nullptr;  // (C) or null
  void* y = nullptr;             // (N, C)
  void* z = nullptr;             // (N, C)
  float* mean = nullptr;         // (N)
  float* rstd = nullptr;         // (N)
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  DType dtype = DType::BF16;
  DType param_dtype = DType::BF16;  // weight and bias: dtype, or f32
  bool dropout = false;
  DropoutParams mask;
};

struct ResidualLayerNormBackwardParams {
  const void* gy = nullptr;      // (N, C); null: zero
  const void* gz = nullptr;      // (N, C)
  const void* y = nullptr;       // (N, C)
  const void* weight = nullptr;  // (C)
  const float* mean = nullptr;   // (N)
  const float* rstd = nullptr;   // (N)
  void* dy = nullptr;            // (N, C)
  void* dh = nullptr;            // (N, C), written only with dropout
  float* dweight = nullptr;      // (C)
  float* dbias = nullptr;        // (C)
  float* dh_bias = nullptr;      // (C) or null: dh's row sums, added (+=)
  bool add_dweight = false, add_dbias = false;  // add the sums into dweight / dbias (+=) instead of storing
  int64_t rows = 0, cols = 0;
  DType dtype = DType::BF16;
  DType param_dtype = DType::BF16;  // weight: dtype, or f32
  bool dropout = false;
  DropoutParams mask;
  int device = 0;  // where the launcher takes its (blocks, 2 or 3, C) fp32 partial-sum scratch
};

FT_CUDA_LAUNCHER(void residual_layernorm_forward(const ResidualLayerNormForwardParams& p, Stream stream));
FT_CUDA_LAUNCHER(void residual_layernorm_backward(const ResidualLayerNormBackwardParams& p, Stream stream));

}  // namespace ft::cuda
