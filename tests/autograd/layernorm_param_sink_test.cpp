// LayerNorm weight and bias gradients added straight into a preset fp32 gradient (the trainer's
// arena, autograd::direct_grad) by the backward's own summing kernel: checked against sums written
// out here in float64, for layernorm and residual_layernorm, CPU and CUDA.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/functions/layernorm.h"
#include "autograd/functions/residual_layernorm.h"
#include "autograd/variable.h"
#include "ops/layernorm.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

constexpr int64_t kRows = 6, kC = 40;

// dweight = sum over rows of gz * xhat(y), dbias = sum of gz, in float64 from the values the
// backward saw (y as rounded by the forward, gz the upstream gradient).
void reference_sums(const Tensor& y, const Tensor& gz, std::vector<double>& dw, std::vector<double>& db) {
  const auto yv = y.to_doubles(), gv = gz.to_doubles();
  dw.assign(kC, 0.0);
  db.assign(kC, 0.0);
  for (int64_t r = 0; r < kRows; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < kC; ++c) mu += yv[r * kC + c];
    mu /= kC;
    for (int64_t c = 0; c < kC; ++c) var += (yv[r * kC + c] - mu) * (yv[r * kC + c] - mu);
    const double rs = 1.0 / std::sqrt(var / kC + 1e-5);
    for (int64_t c = 0; c < kC; ++c) {
      dw[c] += gv[r * kC + c] * (yv[r * kC + c] - mu) * rs;
      db[c] += gv[r * kC + c];
    }
  }
}

// residual: residual_layernorm's z (the LayerNorm of x + h) instead of layernorm(x). Only the
// weight's gradient is preset when bias_too is false: the bias then gets its own bf16 gradient.
void expect_sums_added(Device d, bool residual, bool bias_too) {
  const Tensor x = randn_tensor({kRows, kC}, 1, DType::BF16, d), h = randn_tensor({kRows, kC}, 2, DType::BF16, d);
  const Tensor w = randn_tensor({kC}, 3, DType::BF16, d), b = randn_tensor({kC}, 4, DType::BF16, d);
  const Tensor up = randn_tensor({kRows, kC}, 5, DType::BF16, d);
  const Tensor start_w = randn_tensor({kC}, 6), start_b = randn_tensor({kC}, 7);
  set_requires_grad(x);
  set_requires_grad(w);
  set_requires_grad(b);
  const Tensor gw = start_w.to(d).clone(), gb = start_b.to(d).clone();
  set_grad(w, gw);
  if (bias_too) set_grad(b, gb);
  Tensor y = x, z;
  if (residual) {
    const ResidualLayerNorm out = residual_layernorm(x, h, w, b, 1e-5, 0.f, PhiloxState{});
    y = out.y;
    z = out.z;
  } else {
    z = layernorm(x, w, b);
  }
  backward(z, up);
  std::vector<double> dw, db;
  reference_sums(y, up, dw, db);
  EXPECT_TRUE(grad(w).is_same(gw)) << "the preset gradient is the one that was added into";
  std::vector<double> want_w = start_w.to_doubles(), want_b = start_b.to_doubles();
  for (int64_t c = 0; c < kC; ++c) want_w[c] += dw[c], want_b[c] += db[c];
  // fp32 statistics and sums against float64: a few ulps of fp32.
  EXPECT_LT(test::rel_error(gw.to_doubles(), want_w), 1e-5) << d << " residual " << residual;
  if (bias_too) {
    EXPECT_TRUE(grad(b).is_same(gb));
    EXPECT_LT(test::rel_error(gb.to_doubles(), want_b), 1e-5) << d << " residual " << residual;
  } else {
    EXPECT_EQ(grad(b).dtype(), DType::BF16) << "no preset gradient: the engine's own, in the weight's dtype";
    EXPECT_LT(test::rel_error(grad(b).to_doubles(), db), 1e-2) << d << " residual " << residual;  // bf16
  }
}

TEST(LayerNormParamSink, PresetFp32GradsTakeTheSums) {
  for (bool residual : {false, true})
    for (bool bias_too : {true, false}) expect_sums_added(Device::cpu(), residual, bias_too);
}

TEST(LayerNormParamSinkCuda, PresetFp32GradsTakeTheSums) {
  FT_REQUIRE_CUDA();
  for (bool residual : {false, true})
    for (bool bias_too : {true, false}) expect_sums_added(Device::cuda(), residual, bias_too);
}

TEST(LayerNormParamSink, BadSinkNamesTheProblem) {
  const Tensor x = randn_tensor({kRows, kC}, 1), w = randn_tensor({kC}, 2), b = randn_tensor({kC}, 3);
  const ops::LayerNormOut f = ops::layernorm_forward(x, w, b);
  ops::LayerNormParamSinks wrong_size;
  wrong_size.dweight = Tensor::zeros({kC + 1}, DType::F32);
  test::expect_error([&] { ops::layernorm_backward(x, x, w, f.mean, f.rstd, wrong_size); }, "[layernorm_backward]",
                     {"parameter-gradient sink must be a contiguous f32 tensor of 40 elements"});
  const Tensor x64 = randn_tensor({kRows, kC}, 1, DType::F64), w64 = randn_tensor({kC}, 2, DType::F64);
  const ops::LayerNormOut f64 = ops::layernorm_forward(x64, w64, randn_tensor({kC}, 3, DType::F64));
  ops::LayerNormParamSinks fp32;
  fp32.dbias = Tensor::zeros({kC}, DType::F32);
  test::expect_error([&] { ops::layernorm_backward(x64, x64, w64, f64.mean, f64.rstd, fp32); }, "[layernorm_backward]",
                     {"parameter-gradient sinks are fp32"});
}

}  // namespace
}  // namespace ft::autograd
