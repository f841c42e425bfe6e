#include <gtest/gtest.h>

#include "autograd/functions/cross_entropy.h"
#include "autograd/functions/linear_cross_entropy.h"
#include "autograd/functions/matmul.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

// An ignored row (-1) and both ends of the vocabulary (V = 7).
const std::vector<int32_t> kTargets = {0, 6, -1, 3, 2, 6};

TEST(LinearCrossEntropyGrad, GradcheckXAndW) {
  const Tensor x = randn_tensor({2, 3, 5}, 11), w = randn_tensor({7, 5}, 12);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  GradcheckOptions opts;
  opts.skip = {2};  // integer targets have no gradient
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) { return linear_cross_entropy(in[0], in[1], in[2]).loss; }, {x, w, targets},
      opts);
  EXPECT_TRUE(r.ok) << r.message;
}

// The independent reference: the unfused head, matmul then cross_entropy, in float64 on the CPU.
struct HeadGrads {
  Tensor loss, logits, dx, dw;
};
HeadGrads unfused_f64(const Tensor& x0, const Tensor& w0, const Tensor& targets, const Tensor& up) {
  const Tensor x = ops::cast(x0.to(Device::cpu()), DType::F64), w = ops::cast(w0.to(Device::cpu()), DType::F64);
  set_requires_grad(x);
  set_requires_grad(w);
  ops::MatmulOptions o;
  o.trans_b = true;
  const Tensor logits = matmul(x, w, o);
  const Tensor loss = cross_entropy(logits, targets.to(Device::cpu()));
  backward(loss, ops::cast(up.to(Device::cpu()), DType::F64));
  return {loss, logits.detach(), grad(x), grad(w)};
}

TEST(LinearCrossEntropyGrad, MatchesUnfusedHeadAndLogitsBecomeDlogits) {
  const Tensor x = randn_tensor({2, 3, 5}, 21), w = randn_tensor({7, 5}, 22), up = randn_tensor({2, 3}, 23);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  const HeadGrads ref = unfused_f64(x, w, targets, up);
  const Tensor xf = x.clone(), wf = w.clone();
  set_requires_grad(xf);
  set_requires_grad(wf);
  const LinearCrossEntropyOut out = linear_cross_entropy(xf, wf, targets);
  EXPECT_LT(test::rel_error(out.logits, ref.logits), 1e-6);
  EXPECT_LT(test::rel_error(out.loss, ref.loss), 1e-6);
  const Tensor logits_before = out.logits.clone();
  backward(out.loss, up);
  EXPECT_LT(test::rel_error(grad(xf), ref.dx), 1e-5);
  EXPECT_LT(test::rel_error(grad(wf), ref.dw), 1e-5);
  // The documented contract: after backward the logits' buffer holds dlogits.
  EXPECT_GT(test::max_abs_diff(out.logits, logits_before), 0.0);
}

// CUDA, bf16, V = 67 (rows padded to 72: w's first 64 rows in place and a padded copy of the last
// 3; see HeadWeights) and V = 37 (padded to 40, all of it in the copy), and the trainer's
// arrangement: w a bf16 leaf whose fp32 gradient is preset and already holds a value
// (accumulation), so the weight gradient goes straight into it (autograd::direct_grad). Against
// the float64 unfused head.
TEST(LinearCrossEntropyGradCuda, PaddedRowsAndPresetFp32GradMatchF64) {
  FT_REQUIRE_CUDA();
  for (const auto& [V, Vp] : {std::pair<int64_t, int64_t>{67, 72}, {37, 40}}) {
    const int64_t C = 64;
    std::vector<int32_t> t(4 * 33);
    for (size_t i = 0; i < t.size(); ++i) t[i] = i % 9 == 4 ? -1 : static_cast<int32_t>((i * 37) % V);
    const Tensor targets = Tensor::from_vector(t, {4, 33});
    const Tensor x = randn_tensor({4, 33, C}, 31, DType::BF16), w = randn_tensor({V, C}, 32, DType::BF16, Device::cpu(), 0.2f);
    const Tensor up = randn_tensor({4, 33}, 33);
    const Tensor preset = randn_tensor({V, C}, 34);
    const HeadGrads ref = unfused_f64(x, w, targets, up);

    const Tensor xd = x.to(Device::cuda()), wd = w.to(Device::cuda());
    set_requires_grad(xd);
    set_requires_grad(wd);
    const Tensor wgrad = preset.to(Device::cuda()).clone();  // f32, like the arena's view
    set_grad(wd, wgrad);
    const LinearCrossEntropyOut out = linear_cross_entropy(xd, wd, targets.to(Device::cuda()));
    EXPECT_EQ(out.logits.stride(-2), Vp);  // bf16 rows padded to 16 bytes
    EXPECT_LT(test::rel_error(out.logits, ref.logits), 1e-2) << V;
    EXPECT_LT(test::rel_error(out.loss, ref.loss), 1e-2) << V;
    backward(out.loss, up.to(Device::cuda()));
    EXPECT_LT(test::rel_error(grad(xd), ref.dx), 2e-2) << V;
    EXPECT_TRUE(grad(wd).is_same(wgrad)) << "the preset fp32 gradient is kept and added into";
    const Tensor dw = ops::sub(ops::cast(wgrad.to(Device::cpu()), DType::F64), ops::cast(preset, DType::F64));
    EXPECT_LT(test::rel_error(dw, ref.dw), 2e-2) << V;
  }
}

}  // namespace
}  // namespace ft::autograd
