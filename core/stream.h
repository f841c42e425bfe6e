// An opaque CUDA stream handle, declared without including CUDA headers so that front-end code
// compiles in builds without CUDA. Identical to cudaStream_t (`struct CUstream_st*`).
#pragma once

struct CUstream_st;

namespace ft {
using Stream = CUstream_st*;
}
