#include <gtest/gtest.h>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/residual_layernorm.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

const PhiloxState kState{31, 5};

// x, h (rows of a 3-D input, odd C), weight, bias.
std::vector<Tensor> inputs() {
  return {randn_tensor({2, 3, 7}, 1, DType::F32, Device::cpu(), 2.f), randn_tensor({2, 3, 7}, 2),
          randn_tensor({7}, 3), randn_tensor({7}, 4)};
}

// Both outputs feed the checked value: y * r1 + z * r2 with fixed random r1, r2 (gradcheck then
// contracts it with its own random upstream gradient).
GradcheckResult check_both_outputs(float p) {
  const Tensor r1 = randn_tensor({2, 3, 7}, 5, DType::F64), r2 = randn_tensor({2, 3, 7}, 6, DType::F64);
  auto fn = [&](const std::vector<Tensor>& in) {
    const ResidualLayerNorm out = residual_layernorm(in[0], in[1], in[2], in[3], 1e-5, p, kState);
    return add(mul(out.y, r1), mul(out.z, r2));
  };
  return gradcheck(fn, inputs());
}

TEST(ResidualLayerNormGrad, GradcheckBothOutputsWithoutDropout) {
  const GradcheckResult r = check_both_outputs(0.f);
  EXPECT_TRUE(r.ok) << r.message;
}

// The mask is a function of the fixed PhiloxState, so the finite differences see the same one.
TEST(ResidualLayerNormGrad, GradcheckBothOutputsWithDropout) {
  const GradcheckResult r = check_both_outputs(0.3f);
  EXPECT_TRUE(r.ok) << r.message;
}

// Only z used: y's gradient reaches the node undefined (zero).
TEST(ResidualLayerNormGrad, GradcheckOnlyZ) {
  for (float p : {0.f, 0.3f}) {
    auto fn = [&](const std::vector<Tensor>& in) {
      return residual_layernorm(in[0], in[1], in[2], in[3], 1e-5, p, kState).z;
    };
    const GradcheckResult r = gradcheck(fn, inputs());
    EXPECT_TRUE(r.ok) << "p=" << p << ": " << r.message;
  }
}

// Only y used: z's gradient is undefined, so dx = gy, dh = dropout_backward(gy) and the
// LayerNorm parameters get no gradient (checked as zero).
TEST(ResidualLayerNormGrad, GradcheckOnlyY) {
  auto fn = [&](const std::vector<Tensor>& in) {
    return residual_layernorm(in[0], in[1], in[2], in[3], 1e-5, 0.3f, kState).y;
  };
  const GradcheckResult r = gradcheck(fn, inputs());
  EXPECT_TRUE(r.ok) << r.message;
}

// The branch's bias (h_bias, nn::Block's output projections' bias) as a fifth input: its gradient
// is dh's column sums, taken by the same backward op; every output combination, with and without
// dropout.
TEST(ResidualLayerNormGrad, GradcheckWithBranchBias) {
  std::vector<Tensor> in5 = inputs();
  in5.push_back(randn_tensor({7}, 11));
  const Tensor r1 = randn_tensor({2, 3, 7}, 5, DType::F64), r2 = randn_tensor({2, 3, 7}, 6, DType::F64);
  for (float p : {0.f, 0.3f}) {
    for (int use = 0; use < 3; ++use) {  // y and z, only z, only y
      auto fn = [&](const std::vector<Tensor>& in) {
        const ResidualLayerNorm out = residual_layernorm(in[0], in[1], in[2], in[3], 1e-5, p, kState, in[4]);
        if (use == 1) return out.z;
        if (use == 2) return out.y;
        return add(mul(out.y, r1), mul(out.z, r2));
      };
      const GradcheckResult r = gradcheck(fn, in5);
      EXPECT_TRUE(r.ok) << "p=" << p << " use=" << use << ": " << r.message;
    }
  }
}

TEST(ResidualLayerNormGrad, HalfInputsGiveGradientsInTheirOwnDtype) {
  const Tensor x = randn_tensor({4, 8}, 7, DType::BF16), h = randn_tensor({4, 8}, 8, DType::BF16);
  const Tensor w = randn_tensor({8}, 9, DType::BF16), b = randn_tensor({8}, 10, DType::BF16);
  for (const Tensor& t : {x, h, w, b}) set_requires_grad(t);
  const ResidualLayerNorm out = residual_layernorm(x, h, w, b, 1e-5, 0.f, kState);
  EXPECT_TRUE(requires_grad(out.y));
  EXPECT_TRUE(requires_grad(out.z));
  backward(out.z, Tensor::full({4, 8}, 1.0, DType::BF16));
  EXPECT_EQ(grad(x).dtype(), DType::BF16);
  EXPECT_EQ(grad(w).dtype(), DType::BF16);
  // dbias = sum over rows of gz = 4 exactly; dx and dh are one gradient (p = 0).
  for (float v : grad(b).to_floats()) EXPECT_EQ(v, 4.f);
  EXPECT_EQ(grad(x).to_floats(), grad(h).to_floats());
}

}  // namespace
}  // namespace ft::autograd
