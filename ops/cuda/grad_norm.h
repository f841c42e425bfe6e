// CUDA launcher of the gradient norm (see ops/grad_norm.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

// Addends one pass adds into a segment (ops::add_then_grad_norm): the other ranks of an 8-GPU
// host. The front end adds any beyond these first.
constexpr int kGradNormMaxAddends = 7;

// One contiguous f32 buffer, and optionally what is added into it (written back) before its norm.
struct GradNormSegment {
  float* x = nullptr;
  int64_t n = 0;
  const void* add[kGradNormMaxAddends] = {};  // n elements each, of GradNormParams::add_dtype
  int adds = 0;
};

// Stage-1 blocks for a segment of n elements: a function of n alone (determinism).
inline int grad_norm_blocks(int64_t n) {
  constexpr int64_t kElemsPerBlock = 16384, kMaxBlocks = 1024;
  return static_cast<int>(std::clamp<int64_t>((n + kElemsPerBlock - 1) / kElemsPerBlock, 1, kMaxBlocks));
}

struct GradNormParams {
  const GradNormSegment* segments = nullptr;  // host array
  int count = 0;
  DType add_dtype = DType::F32;  // of every segment's addends: f32, bf16 or f16
  double* partial = nullptr;  // device workspace: sum of grad_norm_blocks(n) over the segments
  float* norm = nullptr;      // device f32 (1)
  float* nonfinite = nullptr; // device f32 (1)
};

FT_CUDA_LAUNCHER(void grad_norm(const GradNormParams& p, Stream stream));

}  // namespace ft::cuda
