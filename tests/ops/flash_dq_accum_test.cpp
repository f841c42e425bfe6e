// The flash backward's dQ accumulator layout (ops/cuda/attention/flash_dq_accum.cuh), checked on the
// host against the mma.sync C fragment definition of the PTX ISA: lane 4r + c of a 16 x 8 tile
// holds rows r and r + 8, columns 2c and 2c + 1. The kernels add through chunk() and the convert
// kernel reads back through row_of() / col_of(), so these must be inverse and cover every element once.
#include <gtest/gtest.h>

#include <vector>

#include "ops/cuda/attention/flash_dq_accum.cuh"

namespace {

template <int D>
void expect_layout_is_a_bijection(int T) {
  using L = ft::cuda::flash::DqAccumLayout<D>;
  const int64_t rows = L::rows(T);
  EXPECT_GE(rows, T);
  EXPECT_EQ(rows % 128, 0);
  EXPECT_LT(rows - T, 128);
  std::vector<int> hits(static_cast<size_t>(rows * D), 0);
  for (int m16 = 0; m16 < rows / 16; ++m16)
    for (int n8 = 0; n8 < D / 8; ++n8)
      for (int lane = 0; lane < 32; ++lane) {
        const int64_t off = L::chunk(m16, n8, lane);
        ASSERT_EQ(off % 4, 0);
        ASSERT_LE(off + 4, rows * D);
        const int r = 16 * m16 + lane / 4, c = 8 * n8 + 2 * (lane % 4);
        EXPECT_EQ(L::row_of(off / 4), r) << "m16 " << m16 << " n8 " << n8 << " lane " << lane;
        EXPECT_EQ(L::col_of(off / 4), c) << "m16 " << m16 << " n8 " << n8 << " lane " << lane;
        // floats 0..3 of the chunk: (r, c), (r, c + 1), (r + 8, c), (r + 8, c + 1)
        for (int e = 0; e < 4; ++e) ++hits[static_cast<size_t>((r + 8 * (e / 2)) * D + c + e % 2)];
      }
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "element " << i;
}

TEST(FlashDqAccumLayout, ChunksAndConvertAgreeD64) {
  for (int T : {1, 17, 128, 129, 1000}) expect_layout_is_a_bijection<64>(T);
}

TEST(FlashDqAccumLayout, ChunksAndConvertAgreeD128) {
  for (int T : {1, 127, 300}) expect_layout_is_a_bijection<128>(T);
}

}  // namespace
