// See l2_flush.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ft::bench {

// Reads nbytes (a multiple of 16) of `buffer` on `stream`, evicting whatever the L2 held.
void flush_l2(const void* buffer, size_t nbytes, int* sink, cudaStream_t stream);

}  // namespace ft::bench
