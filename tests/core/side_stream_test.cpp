// cuda::SideStream (core/cuda/side_stream.h): work on the side stream sees what the main stream
// queued before fork(), the main stream sees what the side stream queued before join(), and both
// hold inside a graph capture (an unjoined fork would make the capture fail). The expected
// values are written on the host.
#include <gtest/gtest.h>

#include <vector>

#include "core/cuda/copy.h"
#include "core/cuda/graph.h"
#include "core/cuda/side_stream.h"
#include "core/tensor.h"
#include "tests/test_util.h"

namespace ft {
namespace {

TEST(SideStream, ForkAndJoinOrderTheTwoStreams) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  const int64_t n = int64_t{1} << 26;  // 256 MB of f32: long enough that a missing wait would show
  Tensor a = Tensor::zeros({n}, DType::F32, dev), b = Tensor::zeros({n}, DType::F32, dev);
  cuda::SideStream side(0);
  for (int round = 1; round <= 3; ++round) {
    a.fill_(static_cast<double>(round));  // main stream
    side.fork();
    cuda::copy_bytes(b.data_ptr(), a.data_ptr(), a.nbytes(), true, true, side.stream());  // b := a, beside
    side.join();
    a.fill_(0.5);  // main again: only after the side stream's copy read a
    EXPECT_EQ(b.to_floats(), std::vector<float>(n, static_cast<float>(round))) << "round " << round;
  }
}

TEST(SideStream, ABranchInsideACapturedGraph) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  const int64_t n = 1 << 22;
  Tensor grads = Tensor::full({n}, 9.0, DType::F32, dev), x = Tensor::full({n}, 2.0, DType::F32, dev);
  Tensor y = Tensor::zeros({n}, DType::F32, dev);
  cuda::SideStream side(0);
  cuda::Graph g(0);
  g.capture([&] {
    side.fork();
    cuda::fill(grads.data_ptr(), n, DType::F32, 0.0, side.stream());  // zeroed beside
    y.copy_(x);                                                          // the main branch
    side.join();
    grads.slice(0, 0, 4).copy_(y.slice(0, 0, 4));  // after the join: lands on the zeroed buffer
  });
  ASSERT_TRUE(g.captured());
  EXPECT_EQ(grads.to_floats(), std::vector<float>(n, 9.f)) << "capturing runs nothing";
  g.replay();
  std::vector<float> want(n, 0.f);
  for (int i = 0; i < 4; ++i) want[i] = 2.f;
  EXPECT_EQ(grads.to_floats(), want);
  EXPECT_EQ(y.to_floats(), std::vector<float>(n, 2.f));
}

}  // namespace
}  // namespace ft
