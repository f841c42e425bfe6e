// Per-device CUDA state: the stream every op runs on, the cuBLAS and cuBLASLt handles and the
// cuBLASLt workspace. Created once per device on first use and kept for the process's life
// (never destroyed: destroying handles during static teardown races the driver's own teardown).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace ft::cuda {

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t blas_lt = nullptr;
  void* workspace = nullptr;  // for cuBLASLt; from the caching allocator
  size_t workspace_bytes = 0;
  cudaDeviceProp props{};
};

// The context of `device`; makes it current on the calling thread.
Context& context(int device);

}  // namespace ft::cuda
