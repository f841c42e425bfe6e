// CUDA ReLU: plain-old-data arguments and launchers (no CUDA headers).
// All tensors hold n contiguous elements of `dtype` (bf16, f16 or f32).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct ReluParams {
  const void* x = nullptr;   // (n)
  const void* dy = nullptr;  // (n), backward only
  void* out = nullptr;       // (n): y in the forward, dx in the backward
  int64_t n = 0;
  DType dtype = DType::BF16;
};

// out = x > 0 ? x : 0 (NaN kept)
FT_CUDA_LAUNCHER(void relu_forward(const ReluParams& p, Stream stream));
// out = x > 0 ? dy : 0
FT_CUDA_LAUNCHER(void relu_backward(const ReluParams& p, Stream stream));

}  // namespace ft::cuda
