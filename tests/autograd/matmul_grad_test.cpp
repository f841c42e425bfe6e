#include <gtest/gtest.h>

#include "autograd/functions/matmul.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

struct Case {
  Shape a, b;
  bool ta, tb, bias;
};

TEST(MatmulGrad, Float64GradcheckOverFlagsBatchesAndBroadcasts) {
  const std::vector<Case> cases = {
      {{3, 4}, {4, 5}, false, false, true},  {{3, 4}, {5, 4}, false, true, true},
      {{4, 3}, {4, 5}, true, false, false},  {{4, 3}, {5, 4}, true, true, true},
      {{2, 3, 4}, {2, 4, 5}, false, false, false},  // batched
      {{2, 3, 4}, {5, 4}, false, true, true},       // (B, T, C) . w^T + b: dW over all rows at once
      {{2, 4, 3}, {4, 5}, true, false, false},      // broadcast b with transposed a: dW summed
      {{3, 4}, {2, 4, 5}, false, false, false},     // broadcast a: dA summed over the batch
      {{2, 2, 3, 4}, {2, 2, 5, 4}, false, true, false},  // two batch dims
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
    std::vector<Tensor> inputs = {randn_tensor(c.a, seed++), randn_tensor(c.b, seed++)};
    if (c.bias) inputs.push_back(randn_tensor({n}, seed++));
    const auto fn = [&](const std::vector<Tensor>& in) {
      ops::MatmulOptions o;
      o.trans_a = c.ta;
      o.trans_b = c.tb;
      o.alpha = 0.5f;
      if (in.size() > 2) o.bias = in[2];
      return matmul(in[0], in[1], o);
    };
    const GradcheckResult r = gradcheck(fn, inputs);
    EXPECT_TRUE(r.ok) << "a" << c.a << " b" << c.b << " ta=" << c.ta << " tb=" << c.tb << ": " << r.message;
  }
}

TEST(MatmulGrad, OnlyRequestedGradientsAreComputed) {
  const Tensor x = randn_tensor({3, 4}, 50), w = randn_tensor({5, 4}, 51);
  set_requires_grad(w);
  ops::MatmulOptions o;
  o.trans_b = true;
  const Tensor y = matmul(x, w, o);
  backward(y, Tensor::full({3, 5}, 1.0, DType::F32));
  EXPECT_TRUE(grad(w).defined());
  EXPECT_EQ(grad(w).shape(), w.shape());
  EXPECT_FALSE(grad(x).defined());
}

// The backward on the GPU (cuBLASLt products with trans flags, the bias gradient through
// ops::sum) gives the CPU's gradients.
TEST(MatmulGradCuda, GradientsMatchCpu) {
  FT_REQUIRE_CUDA();
  const Tensor x = randn_tensor({2, 24, 32}, 60), w = randn_tensor({40, 32}, 61), b = randn_tensor({40}, 62);
  const Tensor up = randn_tensor({2, 24, 40}, 63);
  std::vector<std::vector<Tensor>> grads;
  for (Device d : {Device::cpu(), Device::cuda()}) {
    const Tensor xd = x.to(d).clone(), wd = w.to(d).clone(), bd = b.to(d).clone();
    for (const Tensor& t : {xd, wd, bd}) set_requires_grad(t);
    ops::MatmulOptions o;
    o.trans_b = true;
    o.bias = bd;
    backward(matmul(xd, wd, o), up.to(d));
    grads.push_back({grad(xd), grad(wd), grad(bd)});
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(grads[1][i].defined()) << i;
    EXPECT_TRUE(grads[1][i].is_cuda()) << i;
    // fp32 sums of up to 48 terms in different orders.
    EXPECT_LT(test::rel_error(grads[1][i], grads[0][i]), 1e-5) << "gradient " << i;
  }
}

// The trainer presets every parameter's gradient as an fp32 view (its arena): the weight and bias
// gradients are then added into it in place (autograd::direct_grad) -- one product with beta = 1,
// one fp32 column sum -- and must equal start + the gradients that fresh leaves receive.
void expect_preset_grads_added(Device d, DType dt, double tol) {
  const Tensor x = randn_tensor({2, 3, 16}, 71, dt), w = randn_tensor({8, 16}, 72, dt), b = randn_tensor({8}, 73, dt);
  const Tensor up = randn_tensor({2, 3, 8}, 74, dt);
  std::vector<Tensor> fresh, preset;
  for (bool with_preset : {false, true}) {
    const Tensor xd = x.to(d).clone(), wd = w.to(d).clone(), bd = b.to(d).clone();
    for (const Tensor& t : {xd, wd, bd}) set_requires_grad(t);
    Tensor gw, gb;
    if (with_preset) {
      gw = randn_tensor({8, 16}, 75, DType::F32, d);
      gb = randn_tensor({8}, 76, DType::F32, d);
      set_grad(wd, gw);
      set_grad(bd, gb);
    }
    ops::MatmulOptions o;
    o.trans_b = true;
    o.bias = bd;
    backward(matmul(xd, wd, o), up.to(d));
    if (with_preset) {
      EXPECT_TRUE(grad(wd).is_same(gw) && grad(bd).is_same(gb)) << "the preset buffers are kept";
      preset = {ops::sub(gw, randn_tensor({8, 16}, 75, DType::F32, d)), ops::sub(gb, randn_tensor({8}, 76, DType::F32, d))};
    } else {
      fresh = {ops::cast(grad(wd), DType::F32), ops::cast(grad(bd), DType::F32)};
    }
  }
  EXPECT_LT(test::rel_error(preset[0], fresh[0]), tol) << "dw";
  EXPECT_LT(test::rel_error(preset[1], fresh[1]), tol) << "dbias";
}

TEST(MatmulGrad, PresetFp32GradsAreAddedInPlace) { expect_preset_grads_added(Device::cpu(), DType::F32, 1e-5); }

TEST(MatmulGradCuda, PresetFp32GradsAreAddedInPlace) {
  FT_REQUIRE_CUDA();
  // bf16 operands: the fresh path rounds dw and dbias to bf16 before widening, the preset path
  // does not, so they differ by bf16 rounding (2^-8 relative).
  expect_preset_grads_added(Device::cuda(), DType::BF16, 1e-2);
}

// align_rows (the GPT head: x w^T, no bias, N = 50257 not a multiple of 8): the forward runs
// over the padded N and the backward's dx too; values and both gradients as on the CPU.
TEST(MatmulGradCuda, AlignRowsGradientsMatchCpu) {
  FT_REQUIRE_CUDA();
  const int64_t n = 50257;
  const Tensor x = randn_tensor({2, 3, 32}, 64), w = randn_tensor({n, 32}, 65);
  const Tensor up = randn_tensor({2, 3, n}, 66);
  std::vector<std::vector<Tensor>> out;
  for (Device d : {Device::cpu(), Device::cuda()}) {
    const Tensor xd = x.to(d).clone(), wd = w.to(d).clone();
    for (const Tensor& t : {xd, wd}) set_requires_grad(t);
    ops::MatmulOptions o;
    o.trans_b = true;
    o.align_rows = true;
    const Tensor y = matmul(xd, wd, o);
    backward(y, up.to(d));
    out.push_back({y, grad(xd), grad(wd)});
  }
  EXPECT_EQ(out[1][0].stride(-2), 50260);  // f32 rows padded to 16 bytes on CUDA
  for (int i = 0; i < 3; ++i) EXPECT_LT(test::rel_error(out[1][i], out[0][i]), 1e-5) << "output / dx / dw " << i;
}

}  // namespace
}  // namespace ft::autograd
