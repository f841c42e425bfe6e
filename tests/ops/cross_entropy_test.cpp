#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/cross_entropy.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::randn_tensor;
using test::rel_error;

// Independent double reference: -log(softmax(x)[t]) from direct exponentials, and
// dlogits = (softmax - onehot) * dloss, zero for ignored rows.
void naive_cross_entropy(const std::vector<double>& x, const std::vector<int32_t>& t, const std::vector<double>& dloss,
                         int64_t V, int32_t ignore, std::vector<double>& loss, std::vector<double>& dx) {
  const int64_t rows = static_cast<int64_t>(t.size());
  loss.assign(rows, 0.0);
  dx.assign(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore) continue;
    double m = x[r * V];
    for (int64_t c = 0; c < V; ++c) m = std::max(m, x[r * V + c]);
    double sum = 0;
    for (int64_t c = 0; c < V; ++c) sum += std::exp(x[r * V + c] - m);
    loss[r] = -std::log(std::exp(x[r * V + t[r]] - m) / sum);
    for (int64_t c = 0; c < V; ++c) dx[r * V + c] = (std::exp(x[r * V + c] - m) / sum - (c == t[r])) * dloss[r];
  }
}

std::vector<int32_t> make_targets(int64_t rows, int64_t V, uint64_t seed, bool with_ignored) {
  std::vector<int32_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int32_t>((r * 7919 + seed * 104729) % V);
  if (rows > 2) {
    t[0] = 0;
    t[1] = static_cast<int32_t>(V - 1);
  }
  if (with_ignored && rows > 3) t[2] = -1;
  return t;
}

TEST(CrossEntropy, CpuMatchesNaiveReference) {
  const int64_t B = 2, T = 3, V = 37;
  const Tensor logits = randn_tensor({B, T, V}, 1, DType::F32, Device::cpu(), 3.f);
  const auto tv = make_targets(B * T, V, 1, true);
  const Tensor targets = Tensor::from_vector(tv, {B, T});
  const Tensor dloss = randn_tensor({B, T}, 2);
  std::vector<double> loss, dx;
  naive_cross_entropy(logits.to_doubles(), tv, dloss.to_doubles(), V, -1, loss, dx);
  const ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, targets);
  EXPECT_EQ(out.loss.shape(), (Shape{B, T}));
  EXPECT_EQ(out.loss.dtype(), DType::F32);
  EXPECT_LT(rel_error(out.loss.to_doubles(), loss), 1e-6);
  EXPECT_EQ(out.loss.to_floats()[2], 0.f) << "ignored row";
  const Tensor dlogits = ops::cross_entropy_backward(dloss, logits, targets, out.lse);
  EXPECT_EQ(dlogits.shape(), logits.shape());
  EXPECT_LT(rel_error(dlogits.to_doubles(), dx), 1e-6);
  // Other target dtypes are converted; another ignore_index is honoured.
  std::vector<int64_t> t64(tv.begin(), tv.end());
  t64[2] = 4;  // -1 is an ordinary (out-of-range) id once ignore_index is 5
  t64[3] = 5;
  const ops::CrossEntropyOut o64 = ops::cross_entropy_forward(logits, Tensor::from_vector(t64, {B, T}), 5);
  EXPECT_EQ(o64.loss.to_floats()[3], 0.f);
  EXPECT_NEAR(o64.loss.to_floats()[4], loss[4], 1e-5);
}

TEST(CrossEntropy, CpuHalfLogits) {
  const int64_t rows = 5, V = 50;
  const Tensor logits = randn_tensor({rows, V}, 3, DType::BF16, Device::cpu(), 2.f);
  const auto tv = make_targets(rows, V, 2, false);
  const Tensor dloss = Tensor::full({rows}, 0.2, DType::F32);
  std::vector<double> loss, dx;
  naive_cross_entropy(logits.to_doubles(), tv, dloss.to_doubles(), V, -1, loss, dx);
  const ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, Tensor::from_vector(tv, {rows}));
  EXPECT_EQ(out.loss.dtype(), DType::F32);  // fp32 loss from bf16 logits, no rounding to bf16
  EXPECT_LT(rel_error(out.loss.to_doubles(), loss), 1e-6);
  const Tensor dl = ops::cross_entropy_backward(dloss, logits, Tensor::from_vector(tv, {rows}), out.lse);
  EXPECT_EQ(dl.dtype(), DType::BF16);
  EXPECT_LT(rel_error(dl.to_doubles(), dx), 4e-3);  // one bf16 rounding
}

TEST(CrossEntropy, BadInputsNameTheOpAndShapes) {
  const Tensor logits = Tensor::zeros({4, 10}, DType::F32);
  try {
    ops::cross_entropy_forward(logits, Tensor::zeros({3}, DType::I32));
    FAIL() << "mismatched targets accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[cross_entropy]"), std::string::npos) << m;
    EXPECT_NE(m.find("(3,)"), std::string::npos) << m;
    EXPECT_NE(m.find("(4, 10)"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::cross_entropy_forward(logits, Tensor::zeros({4}, DType::F32)), Error);  // float targets
  try {
    ops::cross_entropy_forward(logits, Tensor::from_vector<int32_t>({0, 1, 10, 2}, {4}));
    FAIL() << "target == V accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("target 10"), std::string::npos) << m;
    EXPECT_NE(m.find("row 2"), std::string::npos) << m;
  }
  EXPECT_THROW(ops::cross_entropy_forward(logits, Tensor::from_vector<int32_t>({0, -2, 1, 2}, {4})), Error);
  const Tensor t = Tensor::from_vector<int32_t>({0, 1, 2, 3}, {4});
  const ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, t);
  EXPECT_THROW(ops::cross_entropy_backward(Tensor::zeros({4}, DType::BF16), logits, t, out.lse), Error);
  EXPECT_THROW(ops::cross_entropy_backward(Tensor::zeros({4}, DType::F32), logits, t, Tensor::zeros({5}, DType::F32)), Error);
}

// V = 50257 (GPT-2: rows start off 16-byte boundaries), a vector multiple, V smaller than one
// vector's misalignment head, ignored rows, and targets at 0 and V - 1.
TEST(CrossEntropyCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  const int64_t vocabs[] = {50257, 1024, 13, 3};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t V : vocabs) {
      const int64_t rows = 7;
      const Tensor logits = randn_tensor({rows, V}, 5, dt, Device::cpu(), 3.f);
      const Tensor targets = Tensor::from_vector(make_targets(rows, V, 3, true), {rows});
      const Tensor dloss = randn_tensor({rows}, 6);
      const ops::CrossEntropyOut c = ops::cross_entropy_forward(logits, targets);
      const Tensor gl = logits.to(Device::cuda()), gt = targets.to(Device::cuda());
      const ops::CrossEntropyOut g = ops::cross_entropy_forward(gl, gt);
      // fp32 online log-sum-exp with __expf against a double sum: ~1e-6 relative.
      EXPECT_LT(rel_error(g.loss, c.loss), 1e-5) << dt << " V=" << V;
      EXPECT_LT(rel_error(g.lse, c.lse), 1e-5) << dt << " V=" << V;
      // f32: exp(x - lse) inherits lse's absolute error; halves: one rounding of the result.
      const double tol = dt == DType::F32 ? 1e-4 : (dt == DType::BF16 ? 8e-3 : 1e-3);
      const Tensor dc = ops::cross_entropy_backward(dloss, logits, targets, c.lse);
      const Tensor dg = ops::cross_entropy_backward(dloss.to(Device::cuda()), gl, gt, g.lse);
      EXPECT_LT(rel_error(dg, dc), tol) << dt << " V=" << V;
      const auto row2 = dg.slice(0, 2, 3).to_floats();
      for (float v : row2) ASSERT_EQ(v, 0.f) << "ignored row must get a zero gradient";
    }
  }
}

// Logits as the GPT head makes them (MatmulOptions::align_rows): the first V columns of rows
// padded to 16 bytes. The forward reads them in place, the backward's dlogits has the same row
// stride, and both match the CPU on the contiguous logits.
TEST(CrossEntropyCuda, PaddedRowsReadInPlaceAndGradientKeepsThem) {
  FT_REQUIRE_CUDA();
  const int64_t B = 2, T = 3, V = 50257, Vp = 50264;
  const Tensor padded = randn_tensor({B, T, Vp}, 8, DType::BF16, Device::cpu(), 3.f);
  const Tensor logits = padded.slice(-1, 0, V).contiguous();  // CPU reference input
  const Tensor gl = padded.to(Device::cuda()).slice(-1, 0, V);
  const Tensor targets = Tensor::from_vector(make_targets(B * T, V, 9, true), {B, T});
  const Tensor dloss = randn_tensor({B, T}, 10);
  const ops::CrossEntropyOut c = ops::cross_entropy_forward(logits, targets);
  const ops::CrossEntropyOut g = ops::cross_entropy_forward(gl, targets.to(Device::cuda()));
  EXPECT_LT(rel_error(g.loss, c.loss), 1e-5);
  const Tensor dg = ops::cross_entropy_backward(dloss.to(Device::cuda()), gl, targets.to(Device::cuda()), g.lse);
  EXPECT_EQ(dg.stride(-2), Vp);
  EXPECT_EQ(dg.shape(), logits.shape());
  EXPECT_LT(rel_error(dg, ops::cross_entropy_backward(dloss, logits, targets, c.lse)), 8e-3);
}

TEST(CrossEntropyCuda, MisalignedLogitsAndOutOfRangeTargets) {
  FT_REQUIRE_CUDA();
  const int64_t rows = 4, V = 1000;
  const Tensor big = randn_tensor({rows * V + 1}, 7, DType::BF16);
  const Tensor logits = big.slice(0, 1, rows * V + 1).view({rows, V});
  const Tensor gl = big.to(Device::cuda()).slice(0, 1, rows * V + 1).view({rows, V});
  const Tensor targets = Tensor::from_vector(make_targets(rows, V, 4, false), {rows});
  const Tensor dloss = Tensor::full({rows}, 1.0, DType::F32);
  const ops::CrossEntropyOut c = ops::cross_entropy_forward(logits, targets);
  const ops::CrossEntropyOut g = ops::cross_entropy_forward(gl, targets.to(Device::cuda()));
  EXPECT_LT(rel_error(g.loss, c.loss), 1e-5);
  EXPECT_LT(rel_error(ops::cross_entropy_backward(dloss.to(Device::cuda()), gl, targets.to(Device::cuda()), g.lse),
                      ops::cross_entropy_backward(dloss, logits, targets, c.lse)),
            8e-3);
  // Unchecked on the device by design: an out-of-range target shows as a NaN loss for its row.
  const Tensor bad = Tensor::from_vector<int32_t>({1, 1000, 2, -7}, {rows}).to(Device::cuda());
  const auto loss = ops::cross_entropy_forward(gl, bad).loss.to_floats();
  EXPECT_TRUE(std::isfinite(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_TRUE(std::isfinite(loss[2]));
  EXPECT_TRUE(std::isnan(loss[3]));
}

// ---- cross_entropy_loss_and_grad_: the loss and dlogits in one op, dlogits over the logits ----

// The one-pass op against the naive reference with dloss = grad_scale * row_scale on every row:
// losses, and the logits' own buffer holding dlogits afterwards (ignored row zero).
TEST(CrossEntropyLossAndGrad, CpuMatchesNaiveInPlace) {
  const int64_t B = 2, T = 3, V = 37;
  const auto tv = make_targets(B * T, V, 11, true);
  const Tensor targets = Tensor::from_vector(tv, {B, T});
  for (DType dt : {DType::F64, DType::F32}) {
    for (bool with_scale : {true, false}) {
      const Tensor logits = randn_tensor({B, T, V}, 12, dt, Device::cpu(), 3.f);
      const std::vector<double> x = logits.to_doubles();
      const double g = with_scale ? 3.0 : 1.0, row_scale = 1.0 / 5.0;
      const Tensor grad_scale = with_scale ? Tensor::full({}, g, dt) : Tensor();
      std::vector<double> loss, dx;
      naive_cross_entropy(x, tv, std::vector<double>(B * T, g * row_scale), V, -1, loss, dx);
      const Tensor l = ops::cross_entropy_loss_and_grad_(logits, targets, grad_scale, row_scale);
      EXPECT_EQ(l.shape(), (Shape{B, T}));
      EXPECT_EQ(l.dtype(), dt);
      const double tol = dt == DType::F64 ? 1e-13 : 1e-6;
      EXPECT_LT(rel_error(l.to_doubles(), loss), tol) << dt;
      EXPECT_LT(rel_error(logits.to_doubles(), dx), tol) << dt << ": the logits now hold dlogits";
      for (double v : logits.slice(0, 0, 1).select(1, 2).to_doubles()) ASSERT_EQ(v, 0.0) << "ignored row";
    }
  }
}

TEST(CrossEntropyLossAndGrad, BadInputsNameTheOp) {
  const Tensor logits = Tensor::zeros({4, 10}, DType::F32);
  const Tensor t = Tensor::from_vector<int32_t>({0, 1, 2, 3}, {4});
  test::expect_error([&] { ops::cross_entropy_loss_and_grad_(logits, t, Tensor::zeros({2}, DType::F32), 1.0); },
                     "[cross_entropy_loss_and_grad_]", {"grad_scale", "(2,)"});
  test::expect_error([&] { ops::cross_entropy_loss_and_grad_(logits, t, Tensor::zeros({}, DType::F64), 1.0); },
                     "[cross_entropy_loss_and_grad_]", {"grad_scale", "f64"});
  test::expect_error([&] { ops::cross_entropy_loss_and_grad_(logits.transpose(0, 1), t, Tensor(), 1.0); },
                     "[cross_entropy_loss_and_grad_]");
  test::expect_error([&] { ops::scalar_ratio(Tensor::zeros({2}, DType::F32), Tensor::zeros({1}, DType::F32)); },
                     "[scalar_ratio]");
}

TEST(ScalarRatio, CpuDividesInItsDtype) {
  const Tensor r = ops::scalar_ratio(Tensor::full({}, 1.0, DType::F64), Tensor::full({1}, 3.0, DType::F64));
  EXPECT_EQ(r.dtype(), DType::F64);
  EXPECT_EQ(r.to_doubles()[0], 1.0 / 3.0);
}

// CUDA against the CPU op on the same logits: GPT-2's V (rows off 16-byte boundaries), an odd V,
// one smaller than a vector's misalignment head; a grad_scale in device memory (fp16's 1024) and
// the mean's row_scale; ignored rows; an out-of-range target is a NaN loss, not a bad read. A
// negative grad_scale takes the kernel's other form (a positive one goes into the exponent).
TEST(CrossEntropyLossAndGradCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  const int64_t vocabs[] = {50257, 1001, 3};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t V : vocabs) {
      for (double grad_scale : {1024.0, -3.0}) {
        const int64_t rows = 7;
        const Tensor logits = randn_tensor({rows, V}, 13, dt, Device::cpu(), 3.f);
        const Tensor targets = Tensor::from_vector(make_targets(rows, V, 5, true), {rows});
        const Tensor c = logits.clone(), gl = logits.to(Device::cuda());
        const Tensor cl = ops::cross_entropy_loss_and_grad_(c, targets, Tensor::full({}, grad_scale, DType::F32), 1.0 / 6);
        const Tensor gloss = ops::cross_entropy_loss_and_grad_(
            gl, targets.to(Device::cuda()), Tensor::full({}, grad_scale, DType::F32, Device::cuda()), 1.0 / 6);
        EXPECT_LT(rel_error(gloss, cl), 1e-5) << dt << " V=" << V << " grad_scale " << grad_scale;
        const double tol = dt == DType::F32 ? 1e-4 : (dt == DType::BF16 ? 8e-3 : 1e-3);
        EXPECT_LT(rel_error(gl, c), tol) << dt << " V=" << V << " grad_scale " << grad_scale;
        for (float v : gl.slice(0, 2, 3).to_floats()) ASSERT_EQ(v, 0.f) << "ignored row must get a zero gradient";
        EXPECT_EQ(gloss.to_floats()[2], 0.f);
      }
    }
  }
  const Tensor gl = randn_tensor({4, 1000}, 14, DType::BF16, Device::cuda());
  const Tensor bad = Tensor::from_vector<int32_t>({1, 1000, 2, -7}, {4}).to(Device::cuda());
  const auto loss = ops::cross_entropy_loss_and_grad_(gl, bad, Tensor(), 1.0).to_floats();
  EXPECT_TRUE(std::isfinite(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_TRUE(std::isnan(loss[3]));
}

// The GPT head's layout: the first V columns of rows padded to 16 bytes. The padding, garbage
// before, is zero afterwards (the head's backward products run over it); the rest matches the
// CPU op on the contiguous logits.
TEST(CrossEntropyLossAndGradCuda, PaddedRowsGetZeroPadding) {
  FT_REQUIRE_CUDA();
  const int64_t B = 2, T = 3, V = 1001, Vp = 1008;
  const Tensor padded = randn_tensor({B, T, Vp}, 15, DType::BF16, Device::cpu(), 3.f);  // padding nonzero
  const Tensor c = padded.slice(-1, 0, V).contiguous();
  const Tensor gfull = padded.to(Device::cuda());
  const Tensor targets = Tensor::from_vector(make_targets(B * T, V, 16, true), {B, T});
  const Tensor cl = ops::cross_entropy_loss_and_grad_(c, targets, Tensor(), 0.25);
  const Tensor gl = ops::cross_entropy_loss_and_grad_(gfull.slice(-1, 0, V), targets.to(Device::cuda()), Tensor(), 0.25);
  EXPECT_EQ(gl.shape(), (Shape{B, T}));
  EXPECT_LT(rel_error(gl, cl), 1e-5);
  EXPECT_LT(rel_error(gfull.slice(-1, 0, V).contiguous(), c), 8e-3);
  for (float v : gfull.slice(-1, V, Vp).contiguous().to_floats()) ASSERT_EQ(v, 0.f) << "row padding";
}

TEST(ScalarRatioCuda, DividesOnTheDevice) {
  FT_REQUIRE_CUDA();
  const Tensor r = ops::scalar_ratio(Tensor::full({}, 3072.0, DType::F32, Device::cuda()),
                                     Tensor::full({}, 1024.0, DType::F32, Device::cuda()));
  EXPECT_TRUE(r.is_cuda());
  EXPECT_EQ(r.to_floats(), std::vector<float>{3.f});
}

}  // namespace
}  // namespace ft
