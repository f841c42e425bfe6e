// Declares a CUDA launcher. In builds with CUDA this is a plain declaration, defined in a .cu
// file; in builds without CUDA it becomes an inline definition that throws, so front-ends call
// launchers unconditionally and no #ifdef appears anywhere else in ops/.
//
//   FT_CUDA_LAUNCHER(void layernorm_forward(const LayerNormParams& p, Stream stream));
#pragma once

#include "core/error.h"
#include "core/stream.h"

#if defined(FT_WITH_CUDA)
#define FT_CUDA_LAUNCHER(...) __VA_ARGS__
#else
#define FT_CUDA_LAUNCHER(...)                                                              \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wunused-parameter\"") \
  [[noreturn]] inline __VA_ARGS__ {                                                        \
    throw ::ft::Error("[" #__VA_ARGS__ "] flashtrain was built without CUDA");           \
  }                                                                                        \
  _Pragma("GCC diagnostic pop")
#endif
