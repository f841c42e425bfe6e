#include <gtest/gtest.h>

#include "autograd/functions/gelu.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

TEST(GeluGrad, Gradcheck) {
  const Tensor x = test::randn_tensor({3, 11}, 1, DType::F32, Device::cpu(), 3.f);
  const GradcheckResult r = gradcheck([](const std::vector<Tensor>& in) { return gelu(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace ft::autograd
