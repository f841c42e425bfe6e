// CUDA launcher of the fused AdamW step (see ops/adamw.h for the update).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct AdamWKernelParams {
  float* p = nullptr;
  const float* g = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  void* copy = nullptr;             // optional working copy of copy_dtype (bf16 or f16)
  DType copy_dtype = DType::BF16;
  int64_t n = 0;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float decay = 1.f;                // 1 - lr * weight_decay
  float step_size = 0.f;            // lr / (1 - beta1^step)
  float inv_sqrt_bc2 = 1.f;         // 1 / sqrt(1 - beta2^step)
  float grad_scale = 1.f;
  const float* grad_norm = nullptr; // optional device scalar: skip if not finite, clip by it
  float max_grad_norm = 0.f;        // > 0: clip
};

FT_CUDA_LAUNCHER(void adamw_step(const AdamWKernelParams& p, Stream stream));

}  // namespace ft::cuda
