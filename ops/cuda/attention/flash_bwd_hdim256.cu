// One head dim per translation unit (builds in parallel; see flash_launch.cuh).
#include "ops/cuda/attention/flash_launch.cuh"

namespace ft::cuda::flash {
template void run_flash_bwd<256>(const AttentionParams& p, cudaStream_t stream,
                                const FlashBackwardMode& mode);
}  // namespace ft::cuda::flash
