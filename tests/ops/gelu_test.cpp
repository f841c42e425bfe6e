#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/gelu.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::randn_tensor;
using test::rel_error;

// Independent references: the tanh form written with std::tanh in double, and its derivative
// by central differences of that function (no closed form shared with the kernels).
double naive_gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double naive_gelu_grad(double x) {
  const double h = 1e-5;
  return (naive_gelu(x + h) - naive_gelu(x - h)) / (2 * h);
}

TEST(Gelu, CpuMatchesNaiveReference) {
  const Tensor x = randn_tensor({3, 41}, 1, DType::F32, Device::cpu(), 3.f);
  const Tensor dy = randn_tensor({3, 41}, 2);
  const auto xv = x.to_doubles(), dyv = dy.to_doubles();
  const auto y = ops::gelu_forward(x).to_doubles(), dx = ops::gelu_backward(dy, x).to_doubles();
  ASSERT_EQ(y.size(), xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_NEAR(y[i], naive_gelu(xv[i]), 1e-6 * (1 + std::fabs(xv[i]))) << xv[i];
    // Central differences in double carry ~1e-10 error; the f32 kernel a few ulps.
    EXPECT_NEAR(dx[i], dyv[i] * naive_gelu_grad(xv[i]), 1e-5 * (1 + std::fabs(dyv[i]))) << xv[i];
  }
  // Known values: gelu(0) = 0, gelu'(0) = 0.5, and the tails approach relu.
  const Tensor pts = Tensor::from_floats({0.f, 10.f, -10.f}, {3}, DType::F32);
  const auto yp = ops::gelu_forward(pts).to_floats();
  EXPECT_EQ(yp[0], 0.f);
  EXPECT_NEAR(yp[1], 10.f, 1e-5);
  EXPECT_NEAR(yp[2], 0.f, 1e-5);
  EXPECT_NEAR(ops::gelu_backward(Tensor::from_floats({1.f}, {1}, DType::F32), Tensor::from_floats({0.f}, {1}, DType::F32)).item(),
              0.5, 1e-7);
}

TEST(Gelu, CpuHalfRoundsOnce) {
  const Tensor x = randn_tensor({100}, 3, DType::BF16, Device::cpu(), 2.f);
  const auto y = ops::gelu_forward(x).to_floats();
  const auto xv = x.to_floats();
  for (size_t i = 0; i < xv.size(); ++i) {
    const float want = bf16_to_float(float_to_bf16(static_cast<float>(naive_gelu(xv[i]))));
    EXPECT_NEAR(y[i], want, std::fabs(want) * 1e-2 + 1e-6) << xv[i];  // at most one bf16 ulp apart
  }
}

TEST(Gelu, BadInputsNameTheOp) {
  EXPECT_THROW(ops::gelu_forward(Tensor::zeros({4}, DType::I32)), Error);
  try {
    ops::gelu_backward(Tensor::zeros({4, 2}, DType::F32), Tensor::zeros({4, 3}, DType::F32));
    FAIL() << "mismatched dy accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[gelu_backward]"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 2)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 3)"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::gelu_backward(Tensor::zeros({4}, DType::BF16), Tensor::zeros({4}, DType::F32)), Error);
}

// Sizes: a multiple of the vector width, an odd size (tail elements), a single element, and a
// misaligned view (scalar path).
TEST(GeluCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t n : {int64_t{3072 * 5}, int64_t{1001}, int64_t{1}}) {
      const Tensor x = randn_tensor({n}, 4, dt, Device::cpu(), 3.f), dy = randn_tensor({n}, 5, dt);
      const Tensor gx = x.to(Device::cuda()), gdy = dy.to(Device::cuda());
      // f32: tanhf on the device vs std::tanh in f32 on the host, a few ulps. Halves: one rounding
      // of nearly equal fp32 values, so at most one ulp apart for a few elements.
      const double tol = dt == DType::F32 ? 1e-6 : (dt == DType::BF16 ? 4e-3 : 5e-4);
      EXPECT_LT(rel_error(ops::gelu_forward(gx), ops::gelu_forward(x)), tol) << dt << " n=" << n;
      EXPECT_LT(rel_error(ops::gelu_backward(gdy, gx), ops::gelu_backward(dy, x)), tol) << dt << " n=" << n;
    }
    const Tensor big = randn_tensor({1001}, 6, dt);
    const Tensor x = big.slice(0, 1, 1001), gx = big.to(Device::cuda()).slice(0, 1, 1001);
    EXPECT_LT(rel_error(ops::gelu_forward(gx), ops::gelu_forward(x)), 4e-3) << dt << " misaligned";
    EXPECT_LT(rel_error(ops::gelu_backward(gx, gx), ops::gelu_backward(x, x)), 4e-3) << dt << " misaligned";
  }
}

}  // namespace
}  // namespace ft
