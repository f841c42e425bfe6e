// CUDA matrix product through cuBLASLt (see ops/matmul_params.h for the geometry).
#pragma once

#include "core/dtype.h"
#include "ops/cuda/launcher.h"
#include "ops/matmul_params.h"

namespace ft::cuda {

// What cuBLASLt's epilogue does besides the optional bias (GELU is the tanh form of ops/gelu.h).
enum class MatmulEpilogue {
  kNone,
  kGeluAux,  // d = gelu(product + bias), aux = product + bias (what the backward needs)
  kDGelu,    // d = product * gelu'(aux)
};

struct MatmulParams {
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  const void* bias = nullptr;   // (n) of `out_dtype`, or null
  DType dtype = DType::F32;     // of a and b: f32, bf16 or f16
  DType out_dtype = DType::F32; // of d and bias: `dtype`, or f32 for bf16/f16 inputs
  MatmulGeometry g;
  MatmulEpilogue epilogue = MatmulEpilogue::kNone;  // not with batched products
  void* aux = nullptr;  // (m, n) of `out_dtype`, row stride ld_aux: written by kGeluAux, read by kDGelu
  int64_t ld_aux = 0;
  bool allow_tf32 = false;
  int device = 0;
  // Not null: alpha is read from this f32 in device memory when the product runs (g.alpha is
  // ignored), and beta (0 or 1) from a constant in device memory (matmul_device_beta):
  // cuBLASLt's device pointer mode, which covers both.
  const float* alpha_device = nullptr;
};

// Runs the product on `stream` with fp32 accumulation. The cuBLASLt plan (descriptors and the
// heuristic's algorithm) is built on the first call of a geometry and cached for the process.
FT_CUDA_LAUNCHER(void matmul(const MatmulParams& p, Stream stream));

// The address of a device-memory float holding `beta` (0 or 1) on the current device: a
// statically initialised __device__ constant, so it needs no allocation or copy and stays valid
// (and capturable) for the process's life.
FT_CUDA_LAUNCHER(const float* matmul_device_beta(float beta));

}  // namespace ft::cuda
