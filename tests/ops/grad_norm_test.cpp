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

// The test's own reference for add_then_grad_norm: each element summed in f32 in addend order,
// then the norm in double.
struct Summed {
  std::vector<std::vector<float>> values;
  double norm = 0;
};
Summed sum_then_norm(const std::vector<Tensor>& grads, const std::vector<std::vector<Tensor>>& addends) {
  Summed out;
  double s = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    std::vector<float> v;
    for (double x : grads[i].to_doubles()) v.push_back(static_cast<float>(x));
    for (const Tensor& a : addends[i]) {
      const std::vector<double> ad = a.to_doubles();
      for (size_t e = 0; e < v.size(); ++e) v[e] += static_cast<float>(ad[e]);
    }
    for (float x : v) s += static_cast<double>(x) * x;
    out.values.push_back(v);
  }
  out.norm = std::sqrt(s);
  return out;
}

void expect_values(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  const std::vector<double> got = t.to_doubles();
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t wrong = 0;
  for (size_t e = 0; e < want.size(); ++e) wrong += static_cast<float>(got[e]) != want[e];
  EXPECT_EQ(wrong, 0) << what << ": elements differing from the f32 sums in addend order";
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

TEST(GradNorm, AddThenNormSumsInOrderOnCpu) {
  // Two tensors with addends (f32, then bf16 in a second call) and one without.
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor a = randn_tensor({1000}, 20), b = randn_tensor({7, 3}, 21), c = randn_tensor({5}, 22);
    const std::vector<std::vector<Tensor>> adds = {
        {randn_tensor({1000}, 23, dt), randn_tensor({1000}, 24, dt, Device::cpu(), 1e-3f)},
        {},
        {randn_tensor({5}, 25, dt, Device::cpu(), 100.f)}};
    const Summed want = sum_then_norm({a, b, c}, adds);
    const ops::GradNorm got = ops::add_then_grad_norm({a, b, c}, adds);
    expect_values(a, want.values[0], "a");
    expect_values(b, want.values[1], "b (no addends)");
    expect_values(c, want.values[2], "c");
    EXPECT_NEAR(got.norm.item(), want.norm, 1e-6 * want.norm) << dt;
    EXPECT_EQ(got.nonfinite.item(), 0.0);
  }
}

TEST(GradNorm, AddThenNormRejectsMismatchedAddends) {
  const Tensor a = randn_tensor({8}, 30);
  expect_error([&] { ops::add_then_grad_norm({a}, {}); }, "[add_then_grad_norm]", {"lists of addends"});
  expect_error([&] { ops::add_then_grad_norm({a}, {{randn_tensor({9}, 31)}}); }, "[add_then_grad_norm]",
               {"9 elements"});
  expect_error([&] { ops::add_then_grad_norm({a}, {{randn_tensor({8}, 32), randn_tensor({8}, 33, DType::BF16)}}); },
               "[add_then_grad_norm]", {"one dtype"});
  expect_error([&] { ops::add_then_grad_norm({a}, {{Tensor::zeros({8}, DType::I32)}}); }, "[add_then_grad_norm]",
               {"i32"});
  expect_error([&] { ops::add_then_grad_norm({Tensor::zeros({8}, DType::F64)}, {{}}); }, "[add_then_grad_norm]",
               {"need f32"});
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

TEST(GradNormCuda, AddThenNormEqualsTheSumsInOrder) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  // f32 addends on an arena-sized buffer; bf16 ones on a view 4 bytes off alignment (the element
  // path) and on an aligned one; nine addends (two more than one pass takes) on a small buffer.
  struct Case {
    const char* what;
    int64_t n, offset;
    DType dt;
    int adds;
  };
  for (const Case& k : {Case{"f32, 3M", 3 * 1000 * 1000 + 3, 0, DType::F32, 3},
                        Case{"bf16, misaligned", 4097, 1, DType::BF16, 1},
                        Case{"bf16, aligned", 1 << 20, 0, DType::BF16, 2},
                        Case{"f16, nine addends", 4099, 0, DType::F16, 9}}) {
    const Tensor g_cpu = randn_tensor({k.offset + k.n}, 40).slice(0, k.offset, k.offset + k.n);
    Tensor g = randn_tensor({k.offset + k.n}, 40).to(gpu).slice(0, k.offset, k.offset + k.n);
    std::vector<Tensor> adds_cpu, adds;
    for (int j = 0; j < k.adds; ++j) {
      const Tensor a = randn_tensor({k.offset + k.n}, 41 + j, k.dt, Device::cpu(), j == 0 ? 1.f : 0.01f);
      adds_cpu.push_back(a.slice(0, k.offset, k.offset + k.n).contiguous());
      adds.push_back(a.to(gpu).slice(0, k.offset, k.offset + k.n));
    }
    const Summed want = sum_then_norm({g_cpu}, {adds_cpu});
    const ops::GradNorm got = ops::add_then_grad_norm({g}, {adds});
    expect_values(g, want.values[0], k.what);
    EXPECT_NEAR(got.norm.item(), want.norm, 2e-7 * want.norm) << k.what;
    EXPECT_EQ(got.nonfinite.item(), 0.0) << k.what;
    // The norm's bits: those of grad_norm over the summed tensor (the same blocks, fixed order).
    EXPECT_EQ(ops::grad_norm(g).norm.item(), got.norm.item()) << k.what;
  }
  // A non-finite addend makes the norm non-finite.
  Tensor g = randn_tensor({1000}, 50).to(gpu);
  Tensor a = randn_tensor({1000}, 51).to(gpu);
  a.slice(0, 7, 8).fill_(INFINITY);
  EXPECT_EQ(ops::add_then_grad_norm({g}, {{a}}).nonfinite.item(), 1.0);
}

}  // namespace
}  // namespace ft
