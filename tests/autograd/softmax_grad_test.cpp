#include <gtest/gtest.h>

#include "autograd/functions/softmax.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

TEST(SoftmaxGrad, Gradcheck) {
  const Tensor x = test::randn_tensor({2, 3, 9}, 1, DType::F32, Device::cpu(), 2.f);
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace ft::autograd
