#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions/gelu.h"
#include "autograd/functions/gelu_mlp.h"
#include "autograd/functions/matmul.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

struct Params {
  Tensor x, w_fc, b_fc, w_proj, b_proj;
  std::vector<Tensor> all() const { return {x, w_fc, b_fc, w_proj, b_proj}; }
};

Params make_params(int64_t rows, int64_t C, int64_t F, DType dt, uint64_t seed) {
  return {randn_tensor({2, rows, C}, seed, dt), randn_tensor({F, C}, seed + 1, dt, Device::cpu(), 0.5f),
          randn_tensor({F}, seed + 2, dt, Device::cpu(), 0.5f), randn_tensor({C, F}, seed + 3, dt, Device::cpu(), 0.3f),
          randn_tensor({C}, seed + 4, dt)};
}

TEST(GeluMlpGrad, GradcheckEveryInput) {
  const Params p = make_params(3, 4, 6, DType::F32, 1);
  const GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) { return gelu_mlp(in[0], in[1], in[2], in[3], in[4]); }, p.all(), {});
  EXPECT_TRUE(r.ok) << r.message;
}

// The independent reference: the unfused layers (matmul + bias, gelu, matmul + bias) in float64
// on the CPU. Returns y and the five gradients.
std::vector<Tensor> unfused_f64(const Params& p, const Tensor& up) {
  std::vector<Tensor> in;
  for (const Tensor& t : p.all()) {
    in.push_back(ops::cast(t.to(Device::cpu()), DType::F64));
    set_requires_grad(in.back());
  }
  ops::MatmulOptions o;
  o.trans_b = true;
  o.bias = in[2];
  const Tensor h = gelu(matmul(in[0], in[1], o));
  o.bias = in[4];
  const Tensor y = matmul(h, in[3], o);
  backward(y, ops::cast(up.to(Device::cpu()), DType::F64));
  std::vector<Tensor> out = {y.detach()};
  for (const Tensor& t : in) out.push_back(grad(t));
  return out;
}

TEST(GeluMlpGrad, MatchesUnfusedLayersInF32) {
  const Params p = make_params(5, 8, 12, DType::F32, 11);
  const Tensor up = randn_tensor({2, 5, 8}, 17);
  const std::vector<Tensor> ref = unfused_f64(p, up);
  for (const Tensor& t : p.all()) set_requires_grad(t);
  const Tensor y = gelu_mlp(p.x, p.w_fc, p.b_fc, p.w_proj, p.b_proj);
  backward(y, up);
  EXPECT_LT(test::rel_error(y, ref[0]), 1e-6);
  const std::vector<Tensor> in = p.all();
  for (size_t i = 0; i < in.size(); ++i) EXPECT_LT(test::rel_error(grad(in[i]), ref[i + 1]), 1e-5) << "input " << i;
}

// CUDA: the products with GELU in cuBLASLt's epilogues, in f32 (no TF32: close to the reference)
// and in bf16 with the trainer's preset fp32 parameter gradients (autograd::direct_grad), against
// the float64 unfused layers.
void expect_cuda_matches(DType dt, double tol, bool preset, int64_t F = 256) {
  const Params p = make_params(40, 64, F, dt, 21);
  const Tensor up = randn_tensor({2, 40, 64}, 27, dt);
  const std::vector<Tensor> ref = unfused_f64(p, up);
  std::vector<Tensor> in, sinks;
  for (const Tensor& t : p.all()) {
    in.push_back(t.to(Device::cuda()));
    set_requires_grad(in.back());
  }
  if (preset) {
    for (size_t i = 1; i < in.size(); ++i) {
      sinks.push_back(Tensor::zeros(in[i].shape(), DType::F32, Device::cuda()));
      set_grad(in[i], sinks.back());
    }
  }
  const Tensor y = gelu_mlp(in[0], in[1], in[2], in[3], in[4]);
  backward(y, up.to(Device::cuda()));
  EXPECT_LT(test::rel_error(y, ref[0]), tol);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_LT(test::rel_error(grad(in[i]), ref[i + 1]), tol) << "input " << i;
    if (preset && i > 0) {
      EXPECT_TRUE(grad(in[i]).is_same(sinks[i - 1])) << "input " << i;
    }
  }
}

TEST(GeluMlpGradCuda, F32MatchesF64Layers) {
  FT_REQUIRE_CUDA();
  expect_cuda_matches(DType::F32, 1e-5, false);
}

TEST(GeluMlpGradCuda, Bf16WithPresetFp32GradsMatchesF64Layers) {
  FT_REQUIRE_CUDA();
  expect_cuda_matches(DType::BF16, 2e-2, true);
}

// d_ff = 37: rows of the auxiliary matrix not 16-byte multiples, so the products and the GELU
// kernels run apart (ops::linear_gelu's fallback); same results.
TEST(GeluMlpGradCuda, OddHiddenWidthTakesTheUnfusedPath) {
  FT_REQUIRE_CUDA();
  expect_cuda_matches(DType::BF16, 2e-2, true, 37);
}

// The epilogue's GELU is the tanh form (GPT-2's), not the erf form: on pre-activations spread
// over [-4, 4] the two differ by up to 4.7e-4, far above f32 rounding.
TEST(GeluMlpGradCuda, EpilogueIsTheTanhForm) {
  FT_REQUIRE_CUDA();
  const Tensor x = randn_tensor({512, 64}, 31, DType::F32, Device::cuda());
  const Tensor w = randn_tensor({128, 64}, 32, DType::F32, Device::cuda(), 0.25f);
  const ops::LinearGeluOut out = ops::linear_gelu(x, w, Tensor());
  const auto pre = out.pre.to_doubles(), h = out.h.to_doubles();
  double err_tanh = 0, err_erf = 0;
  for (size_t i = 0; i < pre.size(); ++i) {
    const double v = pre[i];
    const double tanh_form = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    const double erf_form = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    err_tanh = std::max(err_tanh, std::abs(h[i] - tanh_form));
    err_erf = std::max(err_erf, std::abs(h[i] - erf_form));
  }
  EXPECT_LT(err_tanh, 1e-4) << "erf form error " << err_erf;
  EXPECT_LT(err_tanh, 0.5 * err_erf) << "tanh form error " << err_tanh << ", erf form error " << err_erf;
}

}  // namespace
}  // namespace ft::autograd
