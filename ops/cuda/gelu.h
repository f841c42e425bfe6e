// CUDA GELU (tanh form): plain-old-data arguments and launchers (no CUDA headers).
// All tensors hold n contiguous elements of `dtype` (bf16, f16 or f32); math is fp32.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct GeluParams {
  const void* x = nullptr;   // (n)
  const void* dy = nullptr;  // (n), backward only
  void* out = nullptr;       // (n): y in the forward, dx in the backward
  int64_t n = 0;
  DType dtype = DType::BF16;
};

// out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
FT_CUDA_LAUNCHER(void gelu_forward(const GeluParams& p, Stream stream));
// out = dy * gelu'(x)
FT_CUDA_LAUNCHER(void gelu_backward(const GeluParams& p, Stream stream));

}  // namespace ft::cuda
