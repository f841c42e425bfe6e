#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "ops/residual_layernorm.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::mean_relative_bias;
using test::randn_tensor;
using test::rel_error;

const PhiloxState kState{2024, 7};

// The unfused composition the fused op replaces, with the same ops the model used before:
// ops::dropout then ops::add, ops::layernorm_forward; backward ops::layernorm_backward, the
// engine's ops::add of the two gradients of y, ops::dropout_backward.
struct Unfused {
  Tensor y, z, mean, rstd, dy, dh, dw, db;
};

Unfused unfused(const Tensor& x, const Tensor& h, const Tensor& w, const Tensor& b, const Tensor& gy,
                const Tensor& gz, float p) {
  Unfused u;
  u.y = ops::add(x, p > 0 ? ops::dropout(h, p, kState) : h);
  const ops::LayerNormOut ln = ops::layernorm_forward(u.y, w, b, 1e-5);
  u.z = ln.y;
  u.mean = ln.mean;
  u.rstd = ln.rstd;
  const ops::LayerNormGrads g = ops::layernorm_backward(gz, u.y, w, ln.mean, ln.rstd);
  u.dy = gy.defined() ? ops::add(gy, g.dx) : g.dx;
  u.dh = p > 0 ? ops::dropout_backward(u.dy, p, kState) : u.dy;
  u.dw = g.dweight;
  u.db = g.dbias;
  return u;
}

struct Inputs {
  Tensor x, h, w, b, gy, gz;
};

Inputs make_inputs(const Shape& shape, DType dt, uint64_t seed) {
  const int64_t C = shape.back();
  Inputs in;
  in.x = randn_tensor(shape, seed, dt, Device::cpu(), 2.f);
  in.h = randn_tensor(shape, seed + 1, dt);
  in.w = randn_tensor({C}, seed + 2, dt);
  in.b = randn_tensor({C}, seed + 3, dt);
  in.gy = randn_tensor(shape, seed + 4, dt);
  in.gz = randn_tensor(shape, seed + 5, dt);
  return in;
}

Inputs to_device(const Inputs& in, Device d) {
  return {in.x.to(d), in.h.to(d), in.w.to(d), in.b.to(d), in.gy.to(d), in.gz.to(d)};
}

void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const auto av = a.to_doubles(), bv = b.to_doubles();
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < av.size(); ++i) {
    if (av[i] != bv[i] && !(std::isnan(av[i]) && std::isnan(bv[i]))) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++differ;
    }
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << av.size() << " elements differ, first at " << first
                       << " (" << (first >= 0 ? av[first] : 0) << " vs " << (first >= 0 ? bv[first] : 0) << ")";
}

// Runs the fused op forward and backward on `in` and compares every output with the unfused
// composition: bitwise, except dweight and dbias where `param_grads_bitwise` is false (summed in
// another order: within fp32 rounding).
void expect_fused_equals_unfused(const Inputs& in, bool with_gy, float p, const std::string& what,
                                 bool param_grads_bitwise) {
  const Tensor gy = with_gy ? in.gy : Tensor();
  const Unfused ref = unfused(in.x, in.h, in.w, in.b, gy, in.gz, p);
  const ops::ResidualLayerNormOut out = ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, p, kState);
  expect_bitwise(out.y, ref.y, "y " + what);
  expect_bitwise(out.z, ref.z, "z " + what);
  expect_bitwise(out.mean, ref.mean, "mean " + what);
  expect_bitwise(out.rstd, ref.rstd, "rstd " + what);
  const ops::ResidualLayerNormGrads g =
      ops::residual_layernorm_backward(gy, in.gz, out.y, in.w, out.mean, out.rstd, p, kState);
  expect_bitwise(g.dy, ref.dy, "dy " + what);
  expect_bitwise(g.dh, ref.dh, "dh " + what);
  if (param_grads_bitwise) {
    expect_bitwise(g.dweight, ref.dw, "dweight " + what);
    expect_bitwise(g.dbias, ref.db, "dbias " + what);
  } else {
    EXPECT_LT(rel_error(g.dweight, ref.dw), 1e-5) << what;
    EXPECT_LT(rel_error(g.dbias, ref.db), 1e-5) << what;
  }
}

// On the CPU the fused reference is the unfused composition step for step (the same reference
// kernels, the same roundings between steps), so every output must be bitwise equal: in f64 (the
// gradient check's dtype) and for half inputs, whose intermediate roundings are the point.
TEST(ResidualLayerNorm, CpuEqualsUnfusedCompositionBitwise) {
  const Shape shapes[] = {{13, 37}, {2, 11, 768}, {1, 8}};
  for (DType dt : {DType::F64, DType::F32, DType::BF16, DType::F16}) {
    for (const Shape& shape : shapes) {
      for (float p : {0.f, 0.1f}) {
        for (bool with_gy : {true, false}) {
          const std::string what = str(dt, " ", shape, " p=", p, with_gy ? " gy" : " no gy");
          expect_fused_equals_unfused(make_inputs(shape, dt, 100), with_gy, p, what, true);
        }
      }
    }
  }
}

// Column sums of a (..., C) tensor in float64: the reference for dh_bias.
std::vector<double> column_sums(const Tensor& t) {
  const int64_t C = t.size(-1);
  const std::vector<double> v = t.to_doubles();
  std::vector<double> s(static_cast<size_t>(C), 0.0);
  for (size_t i = 0; i < v.size(); ++i) s[i % C] += v[i];
  return s;
}

// Relative L2 distance of `got` from `want`.
double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The branch bias (h_bias): on the CPU the forward is the op on h + h_bias (ops::add) bitwise, and
// the backward's dh_bias is the column sums of dh (as float64 sums them, to fp32 rounding), added
// into a given sink, which g.dh_bias then is.
TEST(ResidualLayerNorm, BranchBiasIsAddedToTheBranchAndItsGradientSumsDh) {
  for (DType dt : {DType::F64, DType::F32, DType::BF16}) {
    for (const Shape& shape : {Shape{13, 37}, Shape{2, 11, 768}}) {
      for (float p : {0.f, 0.1f}) {
        const std::string what = str(dt, " ", shape, " p=", p);
        const Inputs in = make_inputs(shape, dt, 110);
        const Tensor hb = randn_tensor({shape.back()}, 117, dt);
        const ops::ResidualLayerNormOut f = ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, p, kState, hb);
        const ops::ResidualLayerNormOut ref =
            ops::residual_layernorm_forward(in.x, ops::add(in.h, hb), in.w, in.b, 1e-5, p, kState);
        expect_bitwise(f.y, ref.y, "y " + what);
        expect_bitwise(f.z, ref.z, "z " + what);
        expect_bitwise(f.rstd, ref.rstd, "rstd " + what);
        const ops::ResidualLayerNormGrads g =
            ops::residual_layernorm_backward(in.gy, in.gz, f.y, in.w, f.mean, f.rstd, p, kState, {}, true);
        ASSERT_TRUE(g.dh_bias.defined()) << what;
        EXPECT_EQ(g.dh_bias.dtype(), dt == DType::F64 ? DType::F64 : DType::F32) << what;
        EXPECT_LT(rel_l2(g.dh_bias.to_doubles(), column_sums(g.dh)), dt == DType::F64 ? 1e-14 : 1e-6) << what;
        if (dt == DType::F64) continue;  // sinks are fp32
        const Tensor sink = Tensor::full({shape.back()}, 1.0, DType::F32);
        const ops::ResidualLayerNormGrads gs =
            ops::residual_layernorm_backward(in.gy, in.gz, f.y, in.w, f.mean, f.rstd, p, kState, {}, true, sink);
        EXPECT_EQ(gs.dh_bias.data_ptr(), sink.data_ptr()) << what;
        const std::vector<double> got = sink.to_doubles(), sums = g.dh_bias.to_doubles();
        for (size_t c = 0; c < got.size(); ++c) ASSERT_EQ(got[c], static_cast<float>(1.0 + sums[c])) << what << " c=" << c;
      }
    }
  }
  const Inputs in = make_inputs({4, 8}, DType::F32, 120);
  EXPECT_THROW(ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, 0.f, kState, randn_tensor({7}, 1)), Error);
  EXPECT_THROW(ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, 0.f, kState, randn_tensor({8}, 1, DType::BF16)),
               Error);
}

// Guards the test above against a vacuous pass: with p = 0.1 the branch is really dropped and
// scaled (y differs from x + h), and p = 0 shares dy's buffer for dh.
TEST(ResidualLayerNorm, DropoutIsAppliedAndZeroPSharesTheGradient) {
  const Inputs in = make_inputs({16, 64}, DType::F64, 200);
  const Tensor plain = ops::add(in.x, in.h);
  const ops::ResidualLayerNormOut dropped = ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, 0.1f, kState);
  const auto yv = dropped.y.to_doubles(), xv = in.x.to_doubles(), hv = in.h.to_doubles(), pv = plain.to_doubles();
  int64_t zeroed = 0, scaled = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    if (yv[i] == xv[i]) ++zeroed;  // kept values are scaled by the f32 1 / (1 - p): 1e-7 off 1 / 0.9
    else if (std::fabs(yv[i] - (xv[i] + hv[i] / 0.9)) < 1e-6) ++scaled;
  }
  EXPECT_EQ(zeroed + scaled, static_cast<int64_t>(yv.size()));
  EXPECT_GT(zeroed, 40);  // ~10% of 1024
  EXPECT_LT(zeroed, 170);
  const ops::ResidualLayerNormOut kept = ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, 0.f, kState);
  EXPECT_EQ(kept.y.to_doubles(), pv);
  const ops::ResidualLayerNormGrads g =
      ops::residual_layernorm_backward(in.gy, in.gz, kept.y, in.w, kept.mean, kept.rstd, 0.f, kState);
  EXPECT_EQ(g.dh.data_ptr(), g.dy.data_ptr());
}

TEST(ResidualLayerNorm, BadInputsNameTheOpAndShapes) {
  const Tensor x = Tensor::zeros({4, 8}, DType::F32), w = Tensor::zeros({8}, DType::F32);
  test::expect_error([&] { ops::residual_layernorm_forward(x, Tensor::zeros({4, 7}, DType::F32), w, w, 1e-5, 0.f, kState); },
                     "[residual_layernorm]", {"(4, 7)", "(4, 8)"});
  test::expect_error([&] { ops::residual_layernorm_forward(x, x, Tensor::zeros({7}, DType::F32), w, 1e-5, 0.f, kState); },
                     "[residual_layernorm]", {"weight", "(7,)"});
  test::expect_error([&] { ops::residual_layernorm_forward(x, x, w, Tensor::zeros({8}, DType::BF16), 1e-5, 0.f, kState); },
                     "[residual_layernorm]", {"bias"});
  test::expect_error([&] { ops::residual_layernorm_forward(x, x, w, w, 1e-5, 1.5f, kState); }, "[residual_layernorm]",
                     {"1.5"});
  const ops::ResidualLayerNormOut out = ops::residual_layernorm_forward(x, x, w, w, 1e-5, 0.f, kState);
  test::expect_error(
      [&] { ops::residual_layernorm_backward(Tensor::zeros({4, 8}, DType::BF16), x, out.y, w, out.mean, out.rstd, 0.f, kState); },
      "[residual_layernorm_backward]", {"gy"});
  test::expect_error(
      [&] { ops::residual_layernorm_backward(Tensor(), x, out.y, w, Tensor::zeros({3}, DType::F32), out.rstd, 0.f, kState); },
      "[residual_layernorm_backward]", {"mean/rstd"});
}

// The CUDA op against the CPU op on `in` (on the CPU; parameters in any dtype the ops take).
void expect_cuda_matches_cpu(const Inputs& in, DType dt, float p, bool with_gy, const std::string& what) {
  const Inputs gin = to_device(in, Device::cuda());
  const ops::ResidualLayerNormOut c = ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, p, kState);
  const ops::ResidualLayerNormOut g = ops::residual_layernorm_forward(gin.x, gin.h, gin.w, gin.b, 1e-5, p, kState);
  // y is a sum of two rounded values, rounded: the same IEEE operations on both sides.
  expect_bitwise(g.y.to(Device::cpu()), c.y, "y " + what);
  // As tests/ops/layernorm_test.cpp: f32 differs by summation order (~1e-6); halves by an
  // occasional 1-ulp flip of the final rounding.
  const double tol = dt == DType::F32 ? 1e-5 : (dt == DType::BF16 ? 8e-3 : 1e-3);
  EXPECT_LT(rel_error(g.z, c.z), tol) << what;
  EXPECT_LT(rel_error(g.mean, c.mean), 1e-5) << what;
  EXPECT_LT(rel_error(g.rstd, c.rstd), 1e-5) << what;
  const ops::ResidualLayerNormGrads gc =
      ops::residual_layernorm_backward(with_gy ? in.gy : Tensor(), in.gz, c.y, in.w, c.mean, c.rstd, p, kState);
  const ops::ResidualLayerNormGrads gg =
      ops::residual_layernorm_backward(with_gy ? gin.gy : Tensor(), gin.gz, g.y, gin.w, g.mean, g.rstd, p, kState);
  EXPECT_LT(rel_error(gg.dy, gc.dy), tol) << what;
  EXPECT_LT(rel_error(gg.dh, gc.dh), tol) << what;
  // fp32 sums over rows in another order than the CPU's double sums.
  EXPECT_LT(rel_error(gg.dweight, gc.dweight), 1e-4) << what;
  EXPECT_LT(rel_error(gg.dbias, gc.dbias), 1e-4) << what;
  // The mask: dh is zero exactly where the CPU's is (a kept value is never rounded to 0 here: |dy|
  // is far above the smallest normal).
  const auto dc = gc.dh.to_doubles(), dg = gg.dh.to_doubles();
  int64_t mismatched = 0;
  for (size_t i = 0; i < dc.size(); ++i) mismatched += (dc[i] == 0) != (dg[i] == 0);
  EXPECT_EQ(mismatched, 0) << what;
}

// CUDA against the CPU on the same (rounded) inputs. Shapes cover the vector path (halves: C = 768,
// 1024, 256, 40 -- an odd number of 8-element chunks; f32: C <= 512), rows not a multiple of the
// 16 rows of a pair block, the scalar path (C = 37, C beyond the vector path's registers: 1544
// for halves, f32's 768 and 1024), and a single row.
TEST(ResidualLayerNormCuda, MatchesCpu) {
  FT_REQUIRE_CUDA();
  const Shape shapes[] = {{37, 768}, {2, 3, 1024}, {37, 256}, {21, 40}, {21, 37}, {9, 1544}, {1, 64}};
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    for (const Shape& shape : shapes) {
      for (float p : {0.f, 0.1f}) {
        for (bool with_gy : {true, false}) {
          const std::string what = str(dt, " ", shape, " p=", p, with_gy ? " gy" : " no gy");
          expect_cuda_matches_cpu(make_inputs(shape, dt, 300), dt, p, with_gy, what);
        }
      }
    }
  }
}

// fp32 parameters under half activations (a model whose LayerNorms stay fp32): the CPU path with
// the same random fp32 parameters on every kernel path (vector and scalar, dropout, gy), so that a
// parameter read at the wrong channel shows. Then that they are not rounded to the activation
// dtype: with gain c = 1 + 0.49 ulp of the dtype at 1 and bias 0, z and dy (no gy, p = 0) are c
// times those of gain 1 in exact arithmetic; c rounded to the dtype is 1, a bias of -0.49 ulp
// that the test first checks it sees.
TEST(ResidualLayerNormCuda, Fp32ParamsUnderHalvesMatchCpuAndAreNotRounded) {
  FT_REQUIRE_CUDA();
  const Shape shapes[] = {{37, 768}, {2, 3, 1024}, {21, 40}, {21, 37}, {9, 1544}};
  for (DType dt : {DType::BF16, DType::F16}) {
    for (const Shape& shape : shapes) {
      for (float p : {0.f, 0.1f}) {
        for (bool with_gy : {true, false}) {
          const std::string what = str(dt, " ", shape, " p=", p, with_gy ? " gy" : " no gy");
          Inputs in = make_inputs(shape, dt, 500);
          in.w = randn_tensor({shape.back()}, 502);  // f32
          in.b = randn_tensor({shape.back()}, 503);
          expect_cuda_matches_cpu(in, dt, p, with_gy, what);
        }
      }
      if (shape.size() != 2 || shape[0] < 9) continue;
      const int64_t C = shape.back();
      const double ulp = dt == DType::BF16 ? 0x1p-7 : 0x1p-10, gain = 1 + 0.49 * ulp;
      const Inputs in = to_device(make_inputs(shape, dt, 600), Device::cuda());
      const Tensor one = Tensor::full({C}, 1.0, DType::F32, Device::cuda());
      const Tensor zero = Tensor::zeros({C}, DType::F32, Device::cuda());
      const Tensor wc = Tensor::full({C}, gain, DType::F32, Device::cuda());
      const ops::ResidualLayerNormOut o1 = ops::residual_layernorm_forward(in.x, in.h, one, zero, 1e-5, 0.f, kState);
      const ops::ResidualLayerNormGrads g1 =
          ops::residual_layernorm_backward(Tensor(), in.gz, o1.y, one, o1.mean, o1.rstd, 0.f, kState);
      auto scaled = [&](const Tensor& t) {
        std::vector<double> v = t.to_doubles();
        for (double& e : v) e *= gain;
        return v;
      };
      for (const bool rounded : {true, false}) {
        const Tensor w = rounded ? ops::cast(wc, dt) : wc, b = rounded ? ops::cast(zero, dt) : zero;
        const ops::ResidualLayerNormOut o = ops::residual_layernorm_forward(in.x, in.h, w, b, 1e-5, 0.f, kState);
        const ops::ResidualLayerNormGrads gr =
            ops::residual_layernorm_backward(Tensor(), in.gz, o.y, w, o.mean, o.rstd, 0.f, kState);
        const double bias_z = mean_relative_bias(o.z.to_doubles(), scaled(o1.z));
        const double bias_dy = mean_relative_bias(gr.dy.to_doubles(), scaled(g1.dy));
        if (rounded) {
          EXPECT_LT(bias_z, -0.3 * ulp) << dt << " " << shape;
          EXPECT_LT(bias_dy, -0.3 * ulp) << dt << " " << shape;
        } else {
          EXPECT_LT(std::fabs(bias_z), 0.1 * ulp) << dt << " " << shape;
          EXPECT_LT(std::fabs(bias_dy), 0.1 * ulp) << dt << " " << shape;
        }
      }
    }
  }
}

// The point of the fusion is that the model's numbers do not change: at bf16, GPT-2's C = 768
// and ragged rows, the fused kernels give exactly what the unfused CUDA ops give for y (hence
// the same dropout mask), z, mean, rstd, dy and dh (the LayerNorm row code and its order of sums
// are those of ops/cuda/layernorm.cu); dweight and dbias are summed in another order, so they
// agree to fp32 rounding.
TEST(ResidualLayerNormCuda, Bf16EqualsUnfusedCudaOpsBitwise) {
  FT_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{4, 37, 768}, Shape{131, 768}, Shape{40, 1024}}) {
    for (float p : {0.f, 0.1f}) {
      for (bool with_gy : {true, false}) {
        const std::string what = str(shape, " p=", p, with_gy ? " gy" : " no gy");
        expect_fused_equals_unfused(to_device(make_inputs(shape, DType::BF16, 400), Device::cuda()), with_gy, p, what,
                                    false);
      }
    }
  }
}

// The branch bias on CUDA, every kernel path (vector: C = 768, 1024, 40 for halves; scalar: 37,
// 1544, and f32 past 512), with and without dropout and gy: the forward equals the CUDA op
// on h + h_bias (ops::add) bitwise; dh_bias equals float64 sums of the kernel's own dh (whose
// values MatchesCpu checks) to fp32 rounding, is added into a sink, and repeats bit for bit; and
// it agrees with the CPU op's sums on the same inputs.
TEST(ResidualLayerNormCuda, BranchBiasMatchesAddingItFirstAndSumsDh) {
  FT_REQUIRE_CUDA();
  const Shape shapes[] = {{37, 768}, {2, 3, 1024}, {21, 40}, {21, 37}, {9, 1544}};
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    for (const Shape& shape : shapes) {
      for (float p : {0.f, 0.1f}) {
        for (bool with_gy : {true, false}) {
          const std::string what = str(dt, " ", shape, " p=", p, with_gy ? " gy" : " no gy");
          const int64_t C = shape.back();
          const Inputs cin = make_inputs(shape, dt, 600);
          const Inputs in = to_device(cin, Device::cuda());
          const Tensor chb = randn_tensor({C}, 607, dt), hb = chb.to(Device::cuda());
          const Tensor gy = with_gy ? in.gy : Tensor();
          const ops::ResidualLayerNormOut f = ops::residual_layernorm_forward(in.x, in.h, in.w, in.b, 1e-5, p, kState, hb);
          const ops::ResidualLayerNormOut ref =
              ops::residual_layernorm_forward(in.x, ops::add(in.h, hb), in.w, in.b, 1e-5, p, kState);
          expect_bitwise(f.y, ref.y, "y " + what);
          expect_bitwise(f.z, ref.z, "z " + what);
          expect_bitwise(f.mean, ref.mean, "mean " + what);
          expect_bitwise(f.rstd, ref.rstd, "rstd " + what);
          const Tensor sink = Tensor::full({C}, 0.5, DType::F32, Device::cuda());
          const ops::ResidualLayerNormGrads g =
              ops::residual_layernorm_backward(gy, in.gz, f.y, in.w, f.mean, f.rstd, p, kState, {}, true, sink);
          EXPECT_EQ(g.dh_bias.data_ptr(), sink.data_ptr()) << what;
          std::vector<double> sums = sink.to_doubles();
          for (double& v : sums) v -= 0.5;
          EXPECT_LT(rel_l2(sums, column_sums(g.dh)), 1e-5) << what;
          // The other outputs as without the bias's sums.
          const ops::ResidualLayerNormGrads plain =
              ops::residual_layernorm_backward(gy, in.gz, f.y, in.w, f.mean, f.rstd, p, kState);
          expect_bitwise(g.dh, plain.dh, "dh " + what);
          expect_bitwise(g.dweight, plain.dweight, "dweight " + what);
          expect_bitwise(g.dbias, plain.dbias, "dbias " + what);
          const ops::ResidualLayerNormGrads again =
              ops::residual_layernorm_backward(gy, in.gz, f.y, in.w, f.mean, f.rstd, p, kState, {}, true);
          std::vector<double> fresh = again.dh_bias.to_doubles();
          for (size_t c = 0; c < fresh.size(); ++c) ASSERT_EQ(static_cast<float>(fresh[c] + 0.5), static_cast<float>(sink.to_doubles()[c])) << what;
          // The CPU op on the same inputs (its own forward, its own dh).
          const ops::ResidualLayerNormOut cf =
              ops::residual_layernorm_forward(cin.x, cin.h, cin.w, cin.b, 1e-5, p, kState, chb);
          const ops::ResidualLayerNormGrads cg = ops::residual_layernorm_backward(
              with_gy ? cin.gy : Tensor(), cin.gz, cf.y, cin.w, cf.mean, cf.rstd, p, kState, {}, true);
          EXPECT_LT(rel_l2(fresh, cg.dh_bias.to_doubles()), dt == DType::F32 ? 1e-5 : 1e-2) << what;
        }
      }
    }
  }
}

// The mask alone: with x = 0 and h = 1, y is the dropout of ones, element for element.
TEST(ResidualLayerNormCuda, MaskEqualsDropoutsBitForBit) {
  FT_REQUIRE_CUDA();
  for (const Shape& shape : {Shape{45, 768}, Shape{19, 40}}) {
    const int64_t C = shape.back();
    const Tensor ones = Tensor::full(shape, 1.0, DType::BF16, Device::cuda());
    const Tensor zeros = Tensor::zeros(shape, DType::BF16, Device::cuda());
    const Tensor w = Tensor::full({C}, 1.0, DType::BF16, Device::cuda()), b = Tensor::zeros({C}, DType::BF16, Device::cuda());
    const ops::ResidualLayerNormOut out = ops::residual_layernorm_forward(zeros, ones, w, b, 1e-5, 0.25f, kState);
    expect_bitwise(out.y, ops::dropout(ones, 0.25f, kState), str("mask ", shape));
  }
}

// A view one element past a 16-byte boundary takes the scalar path; deterministic dweight.
TEST(ResidualLayerNormCuda, MisalignedViewAndDeterministicBackward) {
  FT_REQUIRE_CUDA();
  const int64_t rows = 70, C = 768;
  const Inputs in = make_inputs({rows, C}, DType::BF16, 500);
  const Tensor big = randn_tensor({rows * C + 1}, 501, DType::BF16, Device::cpu(), 2.f);
  const Tensor x = big.slice(0, 1, rows * C + 1).view({rows, C});
  const Tensor gx = big.to(Device::cuda()).slice(0, 1, rows * C + 1).view({rows, C});
  const Inputs gin = to_device(in, Device::cuda());
  const ops::ResidualLayerNormOut c = ops::residual_layernorm_forward(x, in.h, in.w, in.b, 1e-5, 0.1f, kState);
  const ops::ResidualLayerNormOut g = ops::residual_layernorm_forward(gx, gin.h, gin.w, gin.b, 1e-5, 0.1f, kState);
  expect_bitwise(g.y.to(Device::cpu()), c.y, "y misaligned");
  EXPECT_LT(rel_error(g.z, c.z), 8e-3);
  const ops::ResidualLayerNormGrads g1 =
      ops::residual_layernorm_backward(gin.gy, gin.gz, g.y, gin.w, g.mean, g.rstd, 0.1f, kState);
  const ops::ResidualLayerNormGrads g2 =
      ops::residual_layernorm_backward(gin.gy, gin.gz, g.y, gin.w, g.mean, g.rstd, 0.1f, kState);
  EXPECT_EQ(g1.dweight.to_floats(), g2.dweight.to_floats()) << "dweight must be bitwise reproducible";
  EXPECT_EQ(g1.dbias.to_floats(), g2.dbias.to_floats());
}

}  // namespace
}  // namespace ft
