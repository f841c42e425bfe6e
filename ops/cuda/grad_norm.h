// CUDA launcher of the gradient norm (see ops/grad_norm.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "ops/cuda/launcher.h"

namespace ft::cuda {

// One contiguous f32 buffer.
struct GradNormSegment {
  const float* x = nullptr;
  int64_t n = 0;
};

// Stage-1 blocks for a segment of n elements: a function of n alone (determinism).
inline int grad_norm_blocks(int64_t n) {
  constexpr int64_t kElemsPerBlock = 16384, kMaxBlocks = 1024;
  return static_cast<int>(std::clamp<int64_t>((n + kElemsPerBlock - 1) / kElemsPerBlock, 1, kMaxBlocks));
}

struct GradNormParams {
  const GradNormSegment* segments = nullptr;  // host array
  int count = 0;
  double* partial = nullptr;  // device workspace: sum of grad_norm_blocks(n) over the segments
  float* norm = nullptr;      // device f32 (1)
  float* nonfinite = nullptr; // device f32 (1)
};

FT_CUDA_LAUNCHER(void grad_norm(const GradNormParams& p, Stream stream));

}  // namespace ft::cuda
