// CUDA pointwise activations (GELU tanh form, ReLU): plain-old-data arguments and launchers (no
// CUDA headers). All tensors hold n contiguous elements of `dtype` (bf16, f16 or f32); math is
// fp32.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

enum class ActivationKind { GeluTanh, Relu };

struct ActivationParams {
  const void* x = nullptr;   // (n)
  const void* dy = nullptr;  // (n), backward only
  void* out = nullptr;       // (n): y in the forward, dx in the backward
  int64_t n = 0;
  DType dtype = DType::BF16;
  ActivationKind kind = ActivationKind::GeluTanh;
};

// gelu: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); relu: out = max(x, 0)
FT_CUDA_LAUNCHER(void activation_forward(const ActivationParams& p, Stream stream));
// out = dy * f'(x) (relu: dy where x > 0)
FT_CUDA_LAUNCHER(void activation_backward(const ActivationParams& p, Stream stream));

}  // namespace ft::cuda
