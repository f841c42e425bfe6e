#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions/relu.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

TEST(ReluGrad, Gradcheck) {
  // Keep every point away from the kink at 0, where finite differences straddle two slopes.
  std::vector<float> v = test::randn(33, 1, 2.f);
  for (float& e : v)
    if (std::fabs(e) < 0.1f) e += e < 0 ? -0.2f : 0.2f;
  const Tensor x = Tensor::from_floats(v, {3, 11}, DType::F32);
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return relu(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace ft::autograd
