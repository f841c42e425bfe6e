#include <gtest/gtest.h>

#include "autograd/functions/cross_entropy.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

// Targets include an ignored row (-1) and both ends of the vocabulary.
const std::vector<int32_t> kTargets = {0, 6, -1, 3, 2, 6};

TEST(CrossEntropyGrad, GradcheckPerRowLosses) {
  const Tensor logits = randn_tensor({2, 3, 7}, 1, DType::F32, Device::cpu(), 2.f);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  GradcheckOptions opts;
  opts.skip = {1};  // integer targets have no gradient
  const GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); }, {logits, targets}, opts);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(CrossEntropyGrad, GradcheckMeanOverValidRows) {
  const Tensor logits = randn_tensor({6, 7}, 2, DType::F32, Device::cpu(), 2.f);
  const Tensor targets = Tensor::from_vector(kTargets, {6});
  GradcheckOptions opts;
  opts.skip = {1};
  const GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& in) { return cross_entropy_mean(in[0], in[1]); }, {logits, targets}, opts);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(CrossEntropyGrad, MeanDividesByValidRowsOnly) {
  // Uniform logits: every valid row's loss is log(V); the mean over 5 valid rows is log(V) too.
  const Tensor logits = Tensor::zeros({6, 7}, DType::F32);
  const Tensor targets = Tensor::from_vector(kTargets, {6});
  EXPECT_NEAR(cross_entropy_mean(logits, targets).item(), std::log(7.0), 1e-6);
  EXPECT_NEAR(cross_entropy_mean(logits, targets, -1, 5).item(), std::log(7.0), 1e-6);
}

}  // namespace
}  // namespace ft::autograd
