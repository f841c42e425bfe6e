// CUDA embedding: plain-old-data arguments and launchers (no CUDA headers).
//
// ids (N) int32; weight (V, C) and out, dout (N, C) contiguous in `dtype` (bf16, f16 or f32);
// dweight (V, C) fp32. Ids outside [0, V) are not checked on the device (the CPU path throws):
// the forward writes a NaN row for them, so the loss turns non-finite instead of the kernel
// reading out of bounds, and the backward skips them.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct EmbeddingForwardParams {
  const int32_t* ids = nullptr;  // (N)
  const void* weight = nullptr;  // (V, C)
  void* out = nullptr;           // (N, C)
  int64_t n = 0, vocab = 0, cols = 0;
  DType dtype = DType::BF16;
};

struct EmbeddingBackwardParams {
  const int32_t* ids = nullptr;  // (N)
  const void* dout = nullptr;    // (N, C)
  float* dweight = nullptr;      // (V, C), accumulated into: dweight[ids[i]] += dout[i]
  int64_t n = 0, vocab = 0, cols = 0;
  DType dtype = DType::BF16;
  int device = 0;  // where the launcher takes its sort scratch
};

FT_CUDA_LAUNCHER(void embedding_forward(const EmbeddingForwardParams& p, Stream stream));
// Deterministic: the ids are sorted (stable radix sort of (id, position) pairs), then one block
// per distinct id sums its rows in position order and adds the sum to dweight once. No atomics,
// so the result is bitwise reproducible run to run.
FT_CUDA_LAUNCHER(void embedding_backward(const EmbeddingBackwardParams& p, Stream stream));

}  // namespace ft::cuda
