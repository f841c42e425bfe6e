// CUDA launcher of dropout (see ops/dropout.h for the mask and the offsets it consumes).
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "core/dtype.h"
#include "ops/cuda/launcher.h"

namespace ft::cuda {

struct DropoutKernelParams {
  const void* x = nullptr;  // (rows, cols) contiguous
  void* y = nullptr;        // (rows, cols) contiguous
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  DropoutParams mask;
};

FT_CUDA_LAUNCHER(void dropout(const DropoutKernelParams& p, Stream stream));

}  // namespace ft::cuda
