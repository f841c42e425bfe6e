// Portability macros shared by host-only and CUDA translation units.
#pragma once

#if defined(__CUDACC__)
#define FT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FT_HOST_DEVICE inline
#endif
