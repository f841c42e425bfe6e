// CUDA cross-entropy fused with log-softmax: plain-old-data arguments and launchers (no CUDA
// headers).
//
// logits and dlogits are (N, V) in `dtype` (bf16, f16 or f32), rows row_stride elements apart
// (>= V: contiguous, or padded rows); targets (N) int32;
// loss, lse, dloss (N) fp32. A row whose target equals ignore_index gets loss 0, lse 0 and an
// all-zero dlogits row. A target outside [0, V) (and not ignore_index) is not checked on the
// device: its loss is NaN, so a bad batch shows as a non-finite loss instead of reading out of
// bounds (the CPU path throws instead).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct CrossEntropyForwardParams {
  const void* logits = nullptr;     // (N, V)
  const int32_t* targets = nullptr;  // (N)
  float* loss = nullptr;            // (N): lse - logits[target]
  float* lse = nullptr;             // (N): log(sum(exp(logits)))
  int64_t rows = 0, vocab = 0, row_stride = 0;
  int32_t ignore_index = -1;
  DType dtype = DType::BF16;
};

struct CrossEntropyBackwardParams {
  const void* logits = nullptr;      // (N, V)
  const int32_t* targets = nullptr;  // (N)
  const float* lse = nullptr;        // (N), from the forward
  const float* dloss = nullptr;      // (N)
  void* dlogits = nullptr;           // (N, V): (softmax - onehot(target)) * dloss; may be logits
  int64_t rows = 0, vocab = 0, row_stride = 0;  // row_stride: of logits and dlogits alike
  int64_t zero_to = 0;  // > vocab: columns [vocab, zero_to) of every dlogits row are set to 0
  int32_t ignore_index = -1;
  DType dtype = DType::BF16;
};

// The loss and its gradient in one kernel, dlogits written over the logits (see
// ops::cross_entropy_loss_and_grad_): per row, loss = lse - logits[target] and
// dlogits = (softmax - onehot(target)) * (*grad_scale) * row_scale.
struct CrossEntropyLossGradParams {
  void* logits = nullptr;              // (N, V), rows row_stride apart: read, then holds dlogits
  const int32_t* targets = nullptr;    // (N)
  float* loss = nullptr;               // (N)
  const float* grad_scale = nullptr;   // (1) in device memory, read by the kernel; null: 1
  float row_scale = 1.f;
  int64_t rows = 0, vocab = 0, row_stride = 0;
  int64_t zero_to = 0;  // > vocab: columns [vocab, zero_to) of every row are set to 0
  int32_t ignore_index = -1;
  DType dtype = DType::BF16;
};

FT_CUDA_LAUNCHER(void cross_entropy_forward(const CrossEntropyForwardParams& p, Stream stream));
FT_CUDA_LAUNCHER(void cross_entropy_backward(const CrossEntropyBackwardParams& p, Stream stream));
FT_CUDA_LAUNCHER(void cross_entropy_loss_and_grad(const CrossEntropyLossGradParams& p, Stream stream));
// *out = *a / *b, three f32 scalars in device memory: one thread.
FT_CUDA_LAUNCHER(void scalar_ratio(const float* a, const float* b, float* out, Stream stream));

}  // namespace ft::cuda
