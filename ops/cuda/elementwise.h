// CUDA launchers of the elementwise family (contiguous buffers; b repeats every nb elements).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

enum class BinaryKind { Add, Sub, Mul };

struct BinaryParams {
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
  int64_t n = 0;
  int64_t nb = 0;
  DType dtype = DType::F32;
  BinaryKind kind = BinaryKind::Add;
};

// out = alpha * x + beta * out_in (out_in may be null: beta ignored). Covers scale and add_.
struct AxpbyParams {
  const void* x = nullptr;
  void* out = nullptr;
  int64_t n = 0;
  float alpha = 1.f;
  float beta = 0.f;
  DType dtype = DType::F32;
  bool widen_x = false;              // x is x_dtype (bf16 / f16), out f32
  DType x_dtype = DType::F32;
  // When set, alpha is multiplied by this one f32 in device memory, read by the kernel (no host
  // read; a captured graph reads its value at each replay).
  const float* alpha_device = nullptr;
};

struct CastParams {
  const void* src = nullptr;
  void* dst = nullptr;
  int64_t n = 0;
  DType src_dtype = DType::F32;
  DType dst_dtype = DType::F32;
};

FT_CUDA_LAUNCHER(void binary(const BinaryParams& p, Stream stream));
FT_CUDA_LAUNCHER(void axpby(const AxpbyParams& p, Stream stream));
FT_CUDA_LAUNCHER(void cast(const CastParams& p, Stream stream));

}  // namespace ft::cuda
