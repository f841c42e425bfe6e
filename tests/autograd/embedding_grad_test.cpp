#include <gtest/gtest.h>

#include "autograd/functions/embedding.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
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

// A preset fp32 gradient on a bf16 weight (the trainer's arena) takes the scatter-add in place:
// start + the exact fp32 sums of dout rows, against a float64 sum written out here.
void expect_preset_grad_added(Device d) {
  const Tensor ids = Tensor::from_vector<int32_t>({4, 0, 4, 2, 4, 1, 0, 4}, {2, 4});
  const Tensor weight = test::randn_tensor({6, 16}, 2, DType::BF16, d);
  const Tensor up = test::randn_tensor({2, 4, 16}, 3, DType::BF16, d);
  const Tensor start = test::randn_tensor({6, 16}, 4);
  set_requires_grad(weight);
  const Tensor g = start.to(d).clone();
  set_grad(weight, g);
  backward(embedding(ids.to(d), weight), up);
  EXPECT_TRUE(grad(weight).is_same(g));
  std::vector<double> want = start.to_doubles();
  const auto u = up.to_doubles();
  const auto id = ids.to_vector<int32_t>();
  for (size_t i = 0; i < id.size(); ++i)
    for (int c = 0; c < 16; ++c) want[id[i] * 16 + c] += u[i * 16 + c];
  EXPECT_LT(test::rel_error(g.to_doubles(), want), 1e-6);
}

TEST(EmbeddingGrad, PresetFp32GradTakesTheScatterAdd) { expect_preset_grad_added(Device::cpu()); }

TEST(EmbeddingGradCuda, PresetFp32GradTakesTheScatterAdd) {
  FT_REQUIRE_CUDA();
  expect_preset_grad_added(Device::cuda());
}

}  // namespace
}  // namespace ft::autograd
