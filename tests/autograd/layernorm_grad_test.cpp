#include <gtest/gtest.h>

#include "autograd/functions/layernorm.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

TEST(LayerNormGrad, Gradcheck) {
  // Rows of a 3-D input, odd C, non-trivial weight and bias.
  const Tensor x = randn_tensor({2, 3, 7}, 1, DType::F32, Device::cpu(), 2.f);
  const Tensor w = randn_tensor({7}, 2), b = randn_tensor({7}, 3);
  auto fn = [](const std::vector<Tensor>& in) { return layernorm(in[0], in[1], in[2], 1e-5); };
  const GradcheckResult r = gradcheck(fn, {x, w, b});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(LayerNormGrad, HalfInputsGiveGradientsInTheirOwnDtype) {
  const Tensor x = randn_tensor({4, 8}, 4, DType::BF16), w = randn_tensor({8}, 5, DType::BF16);
  const Tensor b = randn_tensor({8}, 6, DType::BF16);
  set_requires_grad(x);
  set_requires_grad(w);
  set_requires_grad(b);
  const Tensor y = layernorm(x, w, b);
  EXPECT_TRUE(requires_grad(y));
  backward(y, Tensor::full({4, 8}, 1.0, DType::BF16));
  EXPECT_EQ(grad(x).dtype(), DType::BF16);
  EXPECT_EQ(grad(w).dtype(), DType::BF16);
  // dbias = sum over rows of dy = 4 exactly.
  for (float v : grad(b).to_floats()) EXPECT_EQ(v, 4.f);
}

}  // namespace
}  // namespace ft::autograd
