#include <gtest/gtest.h>

#include "core/allocator.h"
#include "core/tensor.h"
#include "tests/test_util.h"

namespace ft {
namespace {

TEST(CpuAllocator, TracksCurrentAndPeakBytes) {
  Allocator& a = cpu_allocator();
  const size_t before = a.stats().allocated_bytes;
  a.reset_peak();
  {
    Tensor t = Tensor::empty({1000}, DType::F32);  // 4000 bytes, rounded to 4032
    EXPECT_EQ(a.stats().allocated_bytes, before + 4032);
  }
  EXPECT_EQ(a.stats().allocated_bytes, before);
  EXPECT_GE(a.stats().peak_allocated_bytes, before + 4032);
}

TEST(CudaAllocator, ReusesFreedBlocksAndReportsPeak) {
  FT_REQUIRE_CUDA();
  Allocator& a = cuda_allocator(0);
  (void)stream_for(Device::cuda());  // context (and its workspace) first, so counts below are ours
  a.reset_peak();
  const MemoryStats s0 = a.stats();
  void* first;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::F32, Device::cuda());  // 4 MiB
    first = t.data_ptr();
    EXPECT_EQ(a.stats().allocated_bytes, s0.allocated_bytes + (4u << 20));
  }
  EXPECT_EQ(a.stats().allocated_bytes, s0.allocated_bytes);
  const uint64_t mallocs = a.stats().device_allocs;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::F32, Device::cuda());
    EXPECT_EQ(t.data_ptr(), first) << "a freed block of the same size must be reused";
    EXPECT_EQ(a.stats().device_allocs, mallocs);
    Tensor u = Tensor::empty({1 << 19}, DType::F32, Device::cuda());
    EXPECT_EQ(a.stats().peak_allocated_bytes, s0.allocated_bytes + (6u << 20));
  }
  EXPECT_GE(a.stats().reserved_bytes, a.stats().allocated_bytes + (6u << 20));
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes, a.stats().allocated_bytes);
}

TEST(CudaAllocator, OutOfMemoryIsAnErrorNotACrash) {
  FT_REQUIRE_CUDA();
  try {
    Tensor t = Tensor::empty({int64_t(1) << 50}, DType::F32, Device::cuda());
    FAIL() << "a 4 PiB allocation must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  Tensor ok = Tensor::zeros({16}, DType::F32, Device::cuda());  // the device still works
  EXPECT_EQ(ok.to_floats()[3], 0.f);
}

}  // namespace
}  // namespace ft
