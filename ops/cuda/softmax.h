// CUDA softmax over the last axis: plain-old-data arguments and launchers (no CUDA headers).
// x, y, dy, dx are (N, C) contiguous in `dtype` (bf16, f16 or f32); math is fp32.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct SoftmaxParams {
  const void* x = nullptr;   // (N, C): forward input
  const void* y = nullptr;   // (N, C): forward output, backward input
  const void* dy = nullptr;  // (N, C): backward only
  void* out = nullptr;       // (N, C): y in the forward, dx in the backward
  int64_t rows = 0, cols = 0;
  DType dtype = DType::BF16;
};

// out = exp(x - max) / sum(exp(x - max)), per row; reads x, writes out.
FT_CUDA_LAUNCHER(void softmax_forward(const SoftmaxParams& p, Stream stream));
// out = y * (dy - rowsum(dy * y)); reads y and dy, writes out.
FT_CUDA_LAUNCHER(void softmax_backward(const SoftmaxParams& p, Stream stream));

}  // namespace ft::cuda
