#include <gtest/gtest.h>

#include "autograd/functions/reduce.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

TEST(ReduceGrad, Float64GradcheckSumAndMeanOnEveryAxis) {
  const Tensor x = randn_tensor({2, 3, 4}, 1);
  for (int axis : {0, 1, 2, -1}) {
    for (bool keepdim : {false, true}) {
      for (bool is_mean : {false, true}) {
        const auto fn = [&](const std::vector<Tensor>& in) {
          return is_mean ? mean(in[0], axis, keepdim) : sum(in[0], axis, keepdim);
        };
        const GradcheckResult r = gradcheck(fn, {x});
        EXPECT_TRUE(r.ok) << (is_mean ? "mean" : "sum") << " axis " << axis << " keepdim " << keepdim << ": "
                          << r.message;
      }
    }
  }
}

}  // namespace
}  // namespace ft::autograd
