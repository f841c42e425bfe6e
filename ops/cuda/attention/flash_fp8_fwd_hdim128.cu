// FP8 attention forward, D = 128 (its own translation unit: builds in parallel).
#include "ops/cuda/attention/flash_fp8_launch.cuh"

namespace ft::cuda::flash {
template void run_flash_fp8_fwd<128>(const Fp8AttentionParams& p, Stream stream, Fp8FwdVariant variant);
}  // namespace ft::cuda::flash
