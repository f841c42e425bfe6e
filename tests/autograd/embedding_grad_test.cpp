#include <gtest/gtest.h>

#include "autograd/functions/embedding.h"
#include "autograd/gradcheck.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

TEST(EmbeddingGrad, GradcheckWithRepeatedIds) {
  const Tensor ids = Tensor::from_vector<int32_t>({4, 0, 4, 2, 4, 1}, {2, 3});
  const Tensor weight = test::randn_tensor({5, 3}, 1);
  GradcheckOptions opts;
  opts.skip = {0};  // integer ids have no gradient
  const GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); }, {ids, weight}, opts);
  EXPECT_TRUE(r.ok) << r.message;
}

}  // namespace
}  // namespace ft::autograd
