// Every CUDA and cuBLAS call is checked; a failure throws ft::Error naming the call and file:line.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"

#define CUDA_CHECK(call)                                                                       \
  do {                                                                                         \
    const cudaError_t ft_err_ = (call);                                                        \
    if (ft_err_ != cudaSuccess)                                                                \
      throw ::ft::Error(::ft::str("CUDA error ", cudaGetErrorName(ft_err_), " (",              \
                                  cudaGetErrorString(ft_err_), ") in ", #call, " at ",         \
                                  __FILE__, ":", __LINE__));                                   \
  } while (0)

#define CUBLAS_CHECK(call)                                                                     \
  do {                                                                                         \
    const cublasStatus_t ft_st_ = (call);                                                      \
    if (ft_st_ != CUBLAS_STATUS_SUCCESS)                                                       \
      throw ::ft::Error(::ft::str("cuBLAS error ", cublasGetStatusName(ft_st_), " (",          \
                                  cublasGetStatusString(ft_st_), ") in ", #call, " at ",       \
                                  __FILE__, ":", __LINE__));                                   \
  } while (0)

// After a kernel launch: catches bad launch configurations at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
