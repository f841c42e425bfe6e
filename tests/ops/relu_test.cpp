#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/relu.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::randn_tensor;

// Reference: the definition, element by element in double.
TEST(Relu, CpuMatchesTheDefinition) {
  const Tensor x = randn_tensor({3, 41}, 1, DType::F32, Device::cpu(), 3.f);
  const Tensor dy = randn_tensor({3, 41}, 2);
  const auto xv = x.to_doubles(), dyv = dy.to_doubles();
  const auto y = ops::relu_forward(x).to_doubles(), dx = ops::relu_backward(dy, x).to_doubles();
  for (size_t i = 0; i < xv.size(); ++i) {
    EXPECT_EQ(y[i], xv[i] > 0 ? xv[i] : 0.0) << xv[i];
    EXPECT_EQ(dx[i], xv[i] > 0 ? dyv[i] : 0.0) << xv[i];
  }
  // At 0 the gradient is 0 (PyTorch's choice); NaN propagates forward.
  const Tensor pts = Tensor::from_floats({0.f, -0.f, NAN}, {3}, DType::F32);
  const auto yp = ops::relu_forward(pts).to_floats();
  EXPECT_EQ(yp[0], 0.f);
  EXPECT_TRUE(std::isnan(yp[2]));
  EXPECT_EQ(ops::relu_backward(Tensor::from_floats({1.f, 1.f, 1.f}, {3}, DType::F32), pts).to_floats()[0], 0.f);
}

TEST(Relu, HalfDtypesAreExact) {
  for (const DType dt : {DType::BF16, DType::F16}) {
    const Tensor x = randn_tensor({100}, 3, dt, Device::cpu(), 2.f);
    const auto y = ops::relu_forward(x).to_floats(), xv = x.to_floats();
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(y[i], xv[i] > 0 ? xv[i] : 0.f);
    EXPECT_EQ(ops::relu_forward(x).dtype(), dt);
  }
}

TEST(Relu, BadInputsNameTheOp) {
  EXPECT_THROW(ops::relu_forward(Tensor::zeros({4}, DType::I32)), Error);
  try {
    ops::relu_backward(Tensor::zeros({4, 2}, DType::F32), Tensor::zeros({4, 3}, DType::F32));
    FAIL() << "mismatched dy accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[relu_backward]"), std::string::npos) << e.what();
  }
}

TEST(ReluCuda, MatchesTheCpuExactly) {
  FT_REQUIRE_CUDA();
  for (const DType dt : {DType::F32, DType::BF16, DType::F16})
    for (const int64_t n : {int64_t{1000}, int64_t{1003}}) {  // vector path and the scalar tail
      const Tensor x = randn_tensor({n}, 4, dt), dy = randn_tensor({n}, 5, dt);
      const Tensor xg = x.to(Device::cuda()), dyg = dy.to(Device::cuda());
      EXPECT_EQ(test::max_abs_diff(ops::relu_forward(xg), ops::relu_forward(x)), 0.0) << dtype_name(dt);
      EXPECT_EQ(test::max_abs_diff(ops::relu_backward(dyg, xg), ops::relu_backward(dy, x)), 0.0) << dtype_name(dt);
      // Misaligned views take the scalar kernel.
      const Tensor xs = xg.slice(0, 1, n), dys = dyg.slice(0, 1, n);
      EXPECT_EQ(test::max_abs_diff(ops::relu_backward(dys, xs), ops::relu_backward(dy.slice(0, 1, n), x.slice(0, 1, n))),
                0.0);
    }
}

}  // namespace
}  // namespace ft
