#include "core/cuda/check.h"
#include "ops/cuda/attention_kv_sum.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;

// One thread per output element (b, t, hk, d); a warp covers consecutive d of one row, so both the
// group's partial rows and the output row are read and written coalesced.
template <class T>
__global__ void attention_kv_sum_kernel(const T* __restrict__ partial, T* __restrict__ out,
                                        AttentionKvSumParams p) {
  const int group = p.H / p.H_kv;
  const int64_t n = static_cast<int64_t>(p.B) * p.T * p.H_kv * p.D;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const int d = static_cast<int>(i % p.D);
    int64_t rest = i / p.D;
    const int hk = static_cast<int>(rest % p.H_kv);
    rest /= p.H_kv;  // b * T + t
    const T* src = partial + (rest * p.H + static_cast<int64_t>(hk) * group) * p.D + d;
    float sum = 0.f;
    for (int g = 0; g < group; ++g) sum += to_f32(src[static_cast<int64_t>(g) * p.D]);
    const int64_t b = rest / p.T, t = rest % p.T;
    out[b * p.out_batch_stride + t * p.out_row_stride + hk * p.out_head_stride + d] = from_f32<T>(sum);
  }
}

}  // namespace

void attention_kv_sum(const AttentionKvSumParams& p, Stream stream) {
  const int64_t n = static_cast<int64_t>(p.B) * p.T * p.H_kv * p.D;
  if (n == 0) return;
  dispatch_cuda_float(p.dtype, "[attention_kv_sum]", [&](auto tag) {
    using T = decltype(tag);
    attention_kv_sum_kernel<T><<<grid_1d(n, kBlock), kBlock, 0, stream>>>(
        static_cast<const T*>(p.partial), static_cast<T*>(p.out), p);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
