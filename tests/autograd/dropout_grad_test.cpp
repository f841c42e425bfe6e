#include <gtest/gtest.h>

#include "autograd/functions/dropout.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

TEST(DropoutGrad, Float64GradcheckReplaysTheMask) {
  const PhiloxState state{77, 3};
  const auto fn = [&](const std::vector<Tensor>& in) { return dropout(in[0], 0.3f, state); };
  const GradcheckResult r = gradcheck(fn, {randn_tensor({6, 20}, 1)});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(DropoutGrad, GradientIsZeroExactlyWhereTheOutputWasDropped) {
  const Tensor x = randn_tensor({16, 24}, 2);
  set_requires_grad(x);
  const Tensor y = dropout(x, 0.5f, PhiloxState{5, 0});
  const auto yv = y.to_floats();
  backward(y, Tensor::full({16, 24}, 1.0, DType::F32));
  const auto gv = grad(x).to_floats();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(gv[i], yv[i] == 0.f ? 0.f : 2.f) << i;
}

}  // namespace
}  // namespace ft::autograd
