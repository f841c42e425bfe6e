#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/softmax.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::randn_tensor;
using test::rel_error;

// Independent double reference: softmax by direct exponentials (no max shift: inputs are small),
// and the input gradient through the explicit Jacobian dy_i/dx_j = y_i (delta_ij - y_j).
void naive_softmax(const std::vector<double>& x, const std::vector<double>& dy, int64_t rows, int64_t C,
                   std::vector<double>& y, std::vector<double>& dx) {
  y.assign(x.size(), 0.0);
  dx.assign(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(x[r * C + c]);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = std::exp(x[r * C + c]) / sum;
    for (int64_t j = 0; j < C; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < C; ++i) acc += dy[r * C + i] * y[r * C + i] * ((i == j ? 1.0 : 0.0) - y[r * C + j]);
      dx[r * C + j] = acc;
    }
  }
}

TEST(Softmax, CpuMatchesNaiveReference) {
  const int64_t rows = 6, C = 29;
  const Tensor x = randn_tensor({2, 3, C}, 1, DType::F32, Device::cpu(), 2.f), dy = randn_tensor({2, 3, C}, 2);
  std::vector<double> y, dx;
  naive_softmax(x.to_doubles(), dy.to_doubles(), rows, C, y, dx);
  const Tensor got = ops::softmax_forward(x);
  EXPECT_EQ(got.shape(), x.shape());
  EXPECT_LT(rel_error(got.to_doubles(), y), 1e-6);
  EXPECT_LT(rel_error(ops::softmax_backward(dy, got).to_doubles(), dx), 1e-5);
  // Large logits must not overflow (the max is subtracted).
  const auto big = ops::softmax_forward(Tensor::from_floats({1000.f, 1000.f}, {1, 2}, DType::F32)).to_floats();
  EXPECT_FLOAT_EQ(big[0], 0.5f);
  EXPECT_FLOAT_EQ(big[1], 0.5f);
}

TEST(Softmax, BadInputsNameTheOp) {
  EXPECT_THROW(ops::softmax_forward(Tensor::zeros({3, 0}, DType::F32)), Error);
  EXPECT_THROW(ops::softmax_forward(Tensor::zeros({3}, DType::I64)), Error);
  try {
    ops::softmax_backward(Tensor::zeros({2, 5}, DType::F32), Tensor::zeros({2, 4}, DType::F32));
    FAIL() << "mismatched dy accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[softmax_backward]"), std::string::npos) << m;
    EXPECT_NE(m.find("(2, 5)"), std::string::npos) << m;
  }
}

// Register path (C = 1024, 64), looping path (C = 100 for halves, 50257, C beyond the backward
// register limit), and rows not a multiple of the 4 rows per block.
TEST(SoftmaxCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  const Shape shapes[] = {{6, 1024}, {2, 3, 64}, {9, 100}, {3, 2056}, {2, 50257}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (const Shape& shape : shapes) {
      const Tensor x = randn_tensor(shape, 3, dt, Device::cpu(), 4.f), dy = randn_tensor(shape, 4, dt);
      const Tensor y = ops::softmax_forward(x);
      const Tensor gy = ops::softmax_forward(x.to(Device::cuda()));
      // f32: __expf (2 ulp) and a different summation order -> ~1e-6. Halves: one rounding each.
      const double tol = dt == DType::F32 ? 1e-5 : (dt == DType::BF16 ? 8e-3 : 1e-3);
      EXPECT_LT(rel_error(gy, y), tol) << dt << " " << shape;
      EXPECT_LT(rel_error(ops::softmax_backward(dy.to(Device::cuda()), y.to(Device::cuda())), ops::softmax_backward(dy, y)),
                tol)
          << dt << " " << shape;
    }
  }
}

}  // namespace
}  // namespace ft
