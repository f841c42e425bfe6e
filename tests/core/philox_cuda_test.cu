// CPU and CUDA draw identical Philox bits and identical dropout masks.
#include <gtest/gtest.h>

#include <vector>

#include "core/cuda/check.h"
#include "core/dropout_mask.h"
#include "core/tensor.h"
#include "tests/test_util.h"

namespace ft {
namespace {

__global__ void philox_bits_kernel(uint32_t* out, int n, uint64_t seed) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const PhiloxBits b = philox4x32_10(i, i * 7u, 0x1234u, i ^ 0xdeadu, uint32_t(seed), uint32_t(seed >> 32));
  for (int k = 0; k < 4; ++k) out[4 * i + k] = b.v[k];
}

__global__ void dropout_mask_kernel(uint8_t* out, int rows, int cols, DropoutParams d, uint64_t slice) {
  const int r = blockIdx.x, c = threadIdx.x;
  if (c < cols) out[r * cols + c] = dropout_keep_at(d, slice, r, c) ? 1 : 0;
}

TEST(PhiloxCuda, BitsEqualCpu) {
  FT_REQUIRE_CUDA();
  const int n = 4096;
  const uint64_t seed = 0x0123456789abcdefull;
  Tensor out = Tensor::empty({n, 4}, DType::I32, Device::cuda());
  philox_bits_kernel<<<(n + 255) / 256, 256, 0, stream_for(out.device())>>>(
      static_cast<uint32_t*>(out.data_ptr()), n, seed);
  CUDA_CHECK_LAUNCH();
  const std::vector<int32_t> got = out.to_vector<int32_t>();
  for (int i = 0; i < n; ++i) {
    const PhiloxBits b = philox4x32_10(i, i * 7u, 0x1234u, i ^ 0xdeadu, uint32_t(seed), uint32_t(seed >> 32));
    for (int k = 0; k < 4; ++k) ASSERT_EQ(static_cast<uint32_t>(got[4 * i + k]), b.v[k]) << i << "," << k;
  }
}

TEST(PhiloxCuda, DropoutMaskEqualsCpu) {
  FT_REQUIRE_CUDA();
  const int rows = 64, cols = 200;
  const DropoutParams d = make_dropout_params(PhiloxState{77, 1000}, 0.3f);
  Tensor out = Tensor::empty({rows, cols}, DType::U8, Device::cuda());
  dropout_mask_kernel<<<rows, 256, 0, stream_for(out.device())>>>(static_cast<uint8_t*>(out.data_ptr()), rows, cols, d, 5);
  CUDA_CHECK_LAUNCH();
  const std::vector<uint8_t> got = out.to_vector<uint8_t>();
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) ASSERT_EQ(got[r * cols + c], dropout_keep_at(d, 5, r, c) ? 1 : 0);
}

}  // namespace
}  // namespace ft
