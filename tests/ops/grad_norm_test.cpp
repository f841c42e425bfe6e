#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/grad_norm.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::expect_error;

using test::randn_tensor;

double naive_norm(const std::vector<Tensor>& ts) {
  double s = 0;
  for (const Tensor& t : ts)
    for (double v : t.to_doubles()) s += v * v;
  return std::sqrt(s);
}

TEST(GradNorm, CpuMatchesNaiveForOneBufferAndAList) {
  const Tensor a = randn_tensor({1000}, 1), b = randn_tensor({7, 3}, 2);
  const Tensor c = randn_tensor({5}, 3, DType::F32, Device::cpu(), 100.f);
  const ops::GradNorm one = ops::grad_norm(a);
  ASSERT_EQ(one.norm.numel(), 1);
  ASSERT_EQ(one.norm.dtype(), DType::F32);
  EXPECT_NEAR(one.norm.item(), naive_norm({a}), 1e-6 * naive_norm({a}));
  EXPECT_EQ(one.nonfinite.item(), 0.0);
  const ops::GradNorm all = ops::grad_norm(std::vector<Tensor>{a, b, c});
  EXPECT_NEAR(all.norm.item(), naive_norm({a, b, c}), 1e-6 * naive_norm({a, b, c}));
}

TEST(GradNorm, FlagsNonFiniteValues) {
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    Tensor a = randn_tensor({100}, 4);
    a.data<float>()[17] = bad;
    const ops::GradNorm r = ops::grad_norm(a);
    EXPECT_FALSE(std::isfinite(r.norm.item())) << bad;
    EXPECT_EQ(r.nonfinite.item(), 1.0) << bad;
  }
}

TEST(GradNorm, BadInputsNameTheOp) {
  expect_error([] { ops::grad_norm(std::vector<Tensor>{}); }, "[grad_norm]");
  expect_error([] { ops::grad_norm(Tensor::zeros({4}, DType::BF16)); }, "[grad_norm]", {"bf16"});
  expect_error([] { ops::grad_norm(Tensor::zeros({4, 4}, DType::F32).transpose(0, 1)); }, "[grad_norm]",
               {"contiguous"});
}

TEST(GradNormCuda, MatchesCpuAndIsDeterministic) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  // An arena-sized buffer (many stage-1 blocks), a misaligned view, and small odd tensors.
  const Tensor big = randn_tensor({3 * 1000 * 1000 + 3}, 10);
  const Tensor odd = randn_tensor({1 + 4097}, 11).slice(0, 1, 1 + 4097);
  const Tensor tiny = randn_tensor({3}, 12);
  const std::vector<Tensor> cpu = {big, odd, tiny};
  std::vector<Tensor> dev;
  for (const Tensor& t : cpu) dev.push_back(t.to(gpu));
  dev[1] = randn_tensor({1 + 4097}, 11).to(gpu).slice(0, 1, 1 + 4097);  // keep the 4-byte offset on the GPU
  const ops::GradNorm want = ops::grad_norm(cpu), got = ops::grad_norm(dev);
  EXPECT_TRUE(got.norm.is_cuda());
  // Both accumulate in double; the only difference is summation order, far below f32 rounding.
  EXPECT_NEAR(got.norm.item(), want.norm.item(), 2e-7 * want.norm.item());
  EXPECT_EQ(got.nonfinite.item(), 0.0);
  EXPECT_EQ(ops::grad_norm(dev).norm.item(), got.norm.item());  // same bits every run
  Tensor bad = dev[0].clone();
  bad.slice(0, 5, 6).fill_(NAN);
  EXPECT_EQ(ops::grad_norm(bad).nonfinite.item(), 1.0);
}

}  // namespace
}  // namespace ft
