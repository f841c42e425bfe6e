#include <gtest/gtest.h>

#include "autograd/functions/elementwise.h"
#include "autograd/gradcheck.h"
#include "autograd/function.h"
#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

TEST(Engine, DiamondGraphSumsBothPaths) {
  // y = (x * w) + (x * w) * 3  -> dy/dx = 4 w, dy/dw = 4 x (summed over a broadcast w)
  const Tensor x = randn_tensor({2, 3}, 1), w = randn_tensor({3}, 2);
  set_requires_grad(x);
  set_requires_grad(w);
  const Tensor xw = mul(x, w);
  const Tensor y = add(xw, scale(xw, 3.0));
  backward(y, Tensor::full({2, 3}, 1.0, DType::F32));
  const auto gx = grad(x).to_floats(), gw = grad(w).to_floats(), xv = x.to_floats(), wv = w.to_floats();
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(gx[i], 4 * wv[i % 3], 1e-5);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(gw[j], 4 * (xv[j] + xv[3 + j]), 1e-5);
}

TEST(Engine, AccumulatesAcrossBackwardCallsAndIntoPresetGradViews) {
  const Tensor x = randn_tensor({4}, 3);
  set_requires_grad(x);
  Tensor arena = Tensor::zeros({8}, DType::F32);  // a flat gradient buffer; x's grad is a view into it
  set_grad(x, arena.slice(0, 2, 6));
  for (int k = 0; k < 3; ++k) backward(scale(x, 2.0), Tensor::full({4}, 1.0, DType::F32));
  const auto a = arena.to_floats();
  EXPECT_EQ(a, (std::vector<float>{0, 0, 6, 6, 6, 6, 0, 0}));
}

TEST(Engine, NoGradGuardRecordsNothingAndErrorsAreClear) {
  const Tensor x = randn_tensor({3}, 4);
  set_requires_grad(x);
  {
    NoGradGuard guard;
    EXPECT_FALSE(requires_grad(mul(x, x)));
  }
  EXPECT_TRUE(requires_grad(mul(x, x)));
  EXPECT_THROW(backward(Tensor::zeros({1}, DType::F32)), Error);
  EXPECT_THROW(backward(mul(x, x)), Error);  // non-scalar root without a gradient
  EXPECT_THROW(set_requires_grad(Tensor::zeros({2}, DType::I32)), Error);
}

TEST(Engine, SavedTensorsAreReleasedAfterBackward) {
  const Tensor x = randn_tensor({1000}, 5);
  set_requires_grad(x);
  Tensor tmp = scale(x, 2.0);
  std::weak_ptr<Storage> saved = tmp.storage();
  Tensor y = mul(tmp, tmp);  // MulBackward saves tmp twice
  tmp = Tensor();
  EXPECT_FALSE(saved.expired());
  backward(y, Tensor::full({1000}, 1.0, DType::F32));
  EXPECT_TRUE(saved.expired()) << "the node must drop its saved tensors once it has run";
}

TEST(Gradcheck, ElementwiseFamily) {
  const Tensor a = randn_tensor({3, 4}, 6), b = randn_tensor({4}, 7), c = randn_tensor({3, 4}, 8);
  auto fn = [](const std::vector<Tensor>& in) {
    return cast(mul(sub(add(in[0], in[1]), in[2]), scale(in[0], 0.5)), DType::F64);
  };
  const GradcheckResult r = gradcheck(fn, {a, b, c});
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_LT(r.max_abs_error, 1e-7);
}

TEST(Gradcheck, DetectsAWrongGradient) {
  // A deliberately wrong "identity" whose backward doubles the gradient must be caught.
  struct WrongBackward : Node {
    std::vector<Tensor> backward(const std::vector<Tensor>& g) override { return {ops::scale(g[0], 2.0)}; }
    const char* name() const override { return "WrongBackward"; }
  };
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = ops::scale(in[0], 1.0);
    if (needs_graph(in)) record(std::make_shared<WrongBackward>(), in, {y});
    return y;
  };
  EXPECT_FALSE(gradcheck(fn, {randn_tensor({5}, 9)}).ok);
}

}  // namespace
}  // namespace ft::autograd
