// cuda::Graph and the allocator's private pools (core/cuda/graph.h, core/cuda/allocator_pool.h).
// References are computed on the host from the same inputs (an independent path), never by the
// graph itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/allocator_pool.h"
#include "core/cuda/graph.h"
#include "core/tensor.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using Range = std::pair<uintptr_t, uintptr_t>;  // [begin, end)

Range range_of(const Tensor& t) {
  const auto b = reinterpret_cast<uintptr_t>(t.storage()->data());
  return {b, b + t.storage()->nbytes()};
}

bool overlaps(Range a, Range b) { return a.first < b.second && b.first < a.second; }

// Host reference: out[j][i] = a[i][j] * 1 (a transpose), then row 0 overwritten with 2.5.
std::vector<float> reference(const std::vector<float>& a, int64_t rows, int64_t cols) {
  std::vector<float> out(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = a[i * cols + j];
  for (int64_t i = 0; i < rows; ++i) out[i] = 2.5f;
  return out;
}

TEST(CudaGraph, ReplayRecomputesFromTheCurrentInputs) {
  FT_REQUIRE_CUDA();
  const int64_t R = 37, C = 53;
  const Device dev = Device::cuda();
  Tensor a = Tensor::zeros({R, C}, DType::F32, dev);    // the graph's input buffer
  Tensor out = Tensor::zeros({C, R}, DType::F32, dev);  // its output buffer
  cuda::Graph g(0);
  g.capture([&] {
    const Tensor t = a.transpose(0, 1).contiguous();  // a temporary from the pool, freed in capture
    out.copy_(t);
    out.select(0, 0).fill_(2.5);
  });
  ASSERT_TRUE(g.captured());
  EXPECT_GE(g.num_kernels(), 1);
  EXPECT_EQ(out.to_floats(), std::vector<float>(R * C, 0.f)) << "capturing must not run anything";
  for (uint64_t round = 0; round < 3; ++round) {
    const std::vector<float> host = test::randn(R * C, 100 + round);
    a.copy_(Tensor::from_vector(host, {R, C}));
    g.replay();
    EXPECT_EQ(out.to_floats(), reference(host, R, C)) << "replay " << round;
  }
}

TEST(CudaGraph, PoolBlocksNeverAliasOutsideAllocations) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  Tensor in = Tensor::zeros({1 << 16}, DType::F32, dev);
  Tensor out = Tensor::zeros({1 << 16}, DType::F32, dev);
  std::vector<Range> pool_ranges;
  auto g = std::make_unique<cuda::Graph>(0);
  // A block allocated outside and freed inside the capture: the graph may have used it, so the
  // pool adopts it and outside code must never get it back while the graph lives.
  Tensor outside_then_freed = Tensor::empty({1 << 14}, DType::F32, dev);
  const Range adopted = range_of(outside_then_freed);
  g->capture([&] {
    Tensor t1 = in.clone();                       // (64K) f32 temporaries of several sizes
    Tensor t2 = Tensor::empty({1 << 14}, DType::F32, dev);
    t2.fill_(1.0);
    outside_then_freed.copy_(t2);
    outside_then_freed = Tensor();
    Tensor t3 = Tensor::empty({1 << 10}, DType::BF16, dev);
    t3.fill_(0.0);
    out.copy_(t1);
    for (const Tensor* t : {&t1, &t2, &t3}) pool_ranges.push_back(range_of(*t));
  });
  EXPECT_GT(cuda::pool_reserved_bytes(0, g->pool()), size_t{0});
  // Outside the pool, the same sizes again (and more): none may land in the graph's memory.
  std::vector<Tensor> keep;
  for (int rep = 0; rep < 4; ++rep) {
    keep.push_back(Tensor::empty({1 << 16}, DType::F32, dev));
    keep.push_back(Tensor::empty({1 << 14}, DType::F32, dev));
    keep.push_back(Tensor::empty({1 << 10}, DType::BF16, dev));
  }
  for (const Tensor& t : keep) {
    for (const Range& r : pool_ranges) EXPECT_FALSE(overlaps(range_of(t), r)) << "outside tensor in the pool";
    EXPECT_FALSE(overlaps(range_of(t), adopted)) << "a block freed during capture was handed out again";
  }
  // Replays still compute from `in` with outside tensors alive and written.
  for (Tensor& t : keep) t.fill_(-7.0);
  const std::vector<float> host = test::randn(1 << 16, 9);
  in.copy_(Tensor::from_vector(host, {1 << 16}));
  g->replay();
  EXPECT_EQ(out.to_floats(), host);
  // Once the graph is gone its blocks serve everyone again (no leak): a same-size request hits.
  g.reset();
  const MemoryStats before = cuda_allocator(0).stats();
  Tensor again = Tensor::empty({1 << 16}, DType::F32, dev);
  EXPECT_EQ(cuda_allocator(0).stats().device_allocs, before.device_allocs);
}

TEST(CudaGraph, PoolScopeServesFromThePoolOnly) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  const cuda::PoolId pool = cuda::create_pool(0);
  void* in_pool = nullptr;
  {
    cuda::PoolScope scope(0, pool);
    EXPECT_EQ(cuda::active_pool(0), pool);
    in_pool = Tensor::empty({4096}, DType::F32, dev).data_ptr();  // freed at once, to the pool
  }
  EXPECT_EQ(cuda::active_pool(0), cuda::PoolId{0});
  const Tensor outside = Tensor::empty({4096}, DType::F32, dev);
  EXPECT_NE(outside.data_ptr(), in_pool) << "a pool's free block went to an outside request";
  {
    cuda::PoolScope scope(0, pool);
    const Tensor inside = Tensor::empty({4096}, DType::F32, dev);
    EXPECT_EQ(inside.data_ptr(), in_pool) << "the pool must reuse its own free block";
  }
  cuda::release_pool(0, pool);
}

TEST(CudaGraph, HostReadbackDuringCaptureFailsCleanly) {
  FT_REQUIRE_CUDA();
  const Device dev = Device::cuda();
  Tensor a = Tensor::full({8}, 3.0, DType::F32, dev);
  cuda::Graph g(0);
  EXPECT_THROW(g.capture([&] { (void)a.item(); }), Error);
  EXPECT_FALSE(g.captured());
  EXPECT_EQ(cuda::active_pool(0), cuda::PoolId{0});
  // The stream is usable again, eagerly.
  a.fill_(4.0);
  EXPECT_EQ(a.to_floats(), std::vector<float>(8, 4.f));
}

}  // namespace
}  // namespace ft
