// Evicts the op's inputs from L2 before a timed run by reading a buffer several times the L2's
// size. Reading, not writing: a memset leaves the L2 full of dirty lines whose write-back then
// competes with the timed kernel (about 50-60 MB of extra traffic on Hopper, as much as a small
// op moves itself).
#include <cuda_runtime.h>

#include "bench/ops/l2_flush.h"
#include "core/cuda/check.h"

namespace ft::bench {
namespace {

__global__ void l2_flush_kernel(const int4* __restrict__ src, int64_t n, int* sink) {
  int acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const int4 v = __ldcg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fffffff) *sink = acc;  // keeps the loads alive; practically never taken
}

}  // namespace

void flush_l2(const void* buffer, size_t nbytes, int* sink, cudaStream_t stream) {
  l2_flush_kernel<<<1024, 256, 0, stream>>>(static_cast<const int4*>(buffer), static_cast<int64_t>(nbytes / 16), sink);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::bench
