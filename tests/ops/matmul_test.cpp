#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/cuda/graph.h"
#include "ops/matmul.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::expect_error;

using test::randn_tensor;
using test::rel_error;

// Independent reference: double loops over logical (row, col) indices of the given tensors'
// values (any layout; to_doubles reads them in logical order). a and b are 2-D or have equal
// leading batch dims, or one is 2-D and broadcast. Returns batch * m * n values.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, bool ta, bool tb, double alpha = 1.0,
                                 const Tensor& bias = Tensor(), const std::vector<double>& acc = {}) {
  const auto av = a.to_doubles(), bv = b.to_doubles();
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  const int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  const int64_t batch_a = a.numel() / (ar * ac), batch_b = b.numel() / (br * bc);
  const int64_t batch = std::max(batch_a, batch_b);
  const auto biasv = bias.defined() ? bias.to_doubles() : std::vector<double>();
  std::vector<double> out(static_cast<size_t>(batch * m * n));
  for (int64_t z = 0; z < batch; ++z) {
    const double* A = av.data() + (batch_a == 1 ? 0 : z) * ar * ac;
    const double* B = bv.data() + (batch_b == 1 ? 0 : z) * br * bc;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) {
          const double x = ta ? A[l * ac + i] : A[i * ac + l];
          const double y = tb ? B[j * bc + l] : B[l * bc + j];
          s += x * y;
        }
        double v = alpha * s;
        if (!biasv.empty()) v += biasv[j];
        const size_t o = static_cast<size_t>((z * m + i) * n + j);
        if (!acc.empty()) v += acc[o];
        out[o] = v;
      }
  }
  return out;
}

ops::MatmulOptions opts(bool ta, bool tb, float alpha = 1.f, const Tensor& bias = Tensor()) {
  ops::MatmulOptions o;
  o.trans_a = ta;
  o.trans_b = tb;
  o.alpha = alpha;
  o.bias = bias;
  return o;
}

// Stored shape of an operand whose op() is (rows, cols).
Shape stored(int64_t rows, int64_t cols, bool trans) { return trans ? Shape{cols, rows} : Shape{rows, cols}; }

// Runs `fn` and checks that it throws an ft::Error whose message starts with `op` and holds
// every string in `parts`.
TEST(Matmul, CpuMatchesNaiveForAllTransposesWithBiasAndAlpha) {
  const int64_t m = 7, k = 13, n = 5;
  uint64_t seed = 1;
  for (DType dt : {DType::F32, DType::F64}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const Tensor a = randn_tensor(stored(m, k, ta), seed++, dt);
        const Tensor b = randn_tensor(stored(k, n, tb), seed++, dt);
        const Tensor bias = randn_tensor({n}, seed++, dt);
        const Tensor y = ops::matmul(a, b, opts(ta, tb, 0.5f, bias));
        ASSERT_EQ(y.shape(), (Shape{m, n}));
        ASSERT_EQ(y.dtype(), dt);
        // f32: Eigen's blocked sums differ from the double loop by a few ulps of K=13 terms.
        const double tol = dt == DType::F64 ? 1e-14 : 1e-6;
        EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(a, b, ta, tb, 0.5, bias)), tol)
            << dt << " ta=" << ta << " tb=" << tb;
      }
    }
  }
}

TEST(Matmul, CpuBatchedAndBroadcastShapes) {
  // (B, M, K) x (B, K, N)
  const Tensor a = randn_tensor({3, 4, 6}, 10), b = randn_tensor({3, 6, 5}, 11);
  Tensor y = ops::matmul(a, b);
  ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(a, b, false, false)), 1e-6);
  // (B, T, C) x w^T with w (out, C): the nn.Linear case, folded into one 2-D product.
  const Tensor w = randn_tensor({5, 6}, 12);
  y = ops::matmul(a, w, opts(false, true));
  ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(a, w, false, true)), 1e-6);
  // Transposed batched a with a broadcast b (no folding possible).
  const Tensor at = randn_tensor({3, 6, 4}, 13);
  y = ops::matmul(at, w, opts(true, true));
  ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(at, w, true, true)), 1e-6);
  // A plain matrix times a batch.
  const Tensor a2 = randn_tensor({4, 6}, 14);
  y = ops::matmul(a2, b);
  ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(a2, b, false, false)), 1e-6);
  // Two batch dims (B, H, T, D) x (B, H, T, D)^T: attention scores.
  const Tensor q = randn_tensor({2, 3, 5, 4}, 15), kk = randn_tensor({2, 3, 5, 4}, 16);
  y = ops::matmul(q, kk, opts(false, true));
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5, 5}));
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(q, kk, false, true)), 1e-6);
}

TEST(Matmul, CpuStridedViewsNeedNoCopy) {
  // q, k as column slices of a fused (T, 3C) buffer: row stride 3C > C.
  const Tensor qkv = randn_tensor({2, 6, 3 * 4}, 20);
  const Tensor q = qkv.slice(2, 0, 4), k = qkv.slice(2, 4, 8);  // (2, 6, 4) with row stride 12
  Tensor y = ops::matmul(q, k, opts(false, true));
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(q.contiguous(), k.contiguous(), false, true)), 1e-6);
  // A transposed view is a column-major matrix: the trans flag flips internally.
  const Tensor w = randn_tensor({5, 4}, 21);
  const Tensor wt = w.transpose(0, 1);  // (4, 5) view, strides (1, 4)
  const Tensor x = randn_tensor({3, 4}, 22);
  y = ops::matmul(x, wt);
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(x, w, false, true)), 1e-6);
  y = ops::matmul(wt, x, opts(true, true));  // wt^T x^T = w x^T: (5, 3)
  EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(w, x, false, true)), 1e-6);
}

TEST(Matmul, CpuAccumulateAddsIntoTheOutput) {
  const Tensor a = randn_tensor({9, 4}, 30), g = randn_tensor({9, 3}, 31);
  Tensor dw = randn_tensor({3, 4}, 32);  // a previous micro-batch's weight gradient
  const auto before = dw.to_doubles();
  ops::matmul_out(g, a, dw, opts(true, false), /*accumulate=*/true);  // dW += g^T a
  EXPECT_LT(rel_error(dw.to_doubles(), naive_matmul(g, a, true, false, 1.0, Tensor(), before)), 1e-6);
  ops::matmul_out(g, a, dw, opts(true, false));  // overwrite
  EXPECT_LT(rel_error(dw.to_doubles(), naive_matmul(g, a, true, false)), 1e-6);
  // Writing into a column slice of a wider buffer (row stride 7 > 3).
  Tensor wide = Tensor::zeros({4, 7}, DType::F32);
  ops::matmul_out(a, g, wide.slice(1, 2, 5), opts(true, false));
  const auto wv = wide.to_doubles(), ref = naive_matmul(a, g, true, false);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 7; ++j) {
      const double want = (j >= 2 && j < 5) ? ref[i * 3 + (j - 2)] : 0.0;
      EXPECT_NEAR(wv[i * 7 + j], want, 1e-5) << i << "," << j;
    }
}

TEST(Matmul, CpuHalfDtypesComputeInF32AndRoundOnce) {
  for (DType dt : {DType::BF16, DType::F16}) {
    const Tensor a = randn_tensor({6, 16}, 40, dt), b = randn_tensor({16, 8}, 41, dt);
    const Tensor bias = randn_tensor({8}, 42, dt);
    const Tensor y = ops::matmul(a, b, opts(false, false, 1.f, bias));
    ASSERT_EQ(y.dtype(), dt);
    // The reference uses the same (already rounded) inputs: the only error is the final
    // rounding to 8 (bf16) or 11 (f16) significant bits, < 2^-8 relative per element.
    EXPECT_LT(rel_error(y.to_doubles(), naive_matmul(a, b, false, false, 1.0, bias)), 4e-3) << dt;
  }
}

TEST(Matmul, CpuHalfInputsAccumulateIntoAnF32Output) {
  // The weight gradient of bf16 layers summed straight into an fp32 gradient buffer.
  const Tensor g = randn_tensor({12, 5}, 45, DType::BF16), x = randn_tensor({12, 7}, 46, DType::BF16);
  Tensor dw = randn_tensor({5, 7}, 47);
  const auto before = dw.to_doubles();
  ops::matmul_out(g, x, dw, opts(true, false), /*accumulate=*/true);
  ASSERT_EQ(dw.dtype(), DType::F32);
  // Products of bf16 values are exact in fp32; only the f32 sums round.
  EXPECT_LT(rel_error(dw.to_doubles(), naive_matmul(g, x, true, false, 1.0, Tensor(), before)), 1e-6);
  expect_error([&] { ops::matmul_out(g, x, Tensor::zeros({5, 7}, DType::F16), opts(true, false)); }, "[matmul]",
               {"output", "f16", "bf16"});
}

TEST(Matmul, BadInputsNameTheOpAndShapes) {
  const Tensor a = Tensor::zeros({4, 3}, DType::F32), b = Tensor::zeros({5, 2}, DType::F32);
  expect_error([&] { ops::matmul(a, b); }, "[matmul]", {"(4, 3)", "(5, 2)", "inner dims"});
  expect_error([&] { ops::matmul(a, Tensor::zeros({3, 2}, DType::BF16)); }, "[matmul]", {"f32", "bf16"});
  expect_error([&] { ops::matmul(Tensor::zeros({3}, DType::F32), b); }, "[matmul]", {"(3,)"});
  expect_error([&] { ops::matmul(Tensor::zeros({2, 4, 3}, DType::F32), Tensor::zeros({3, 3, 2}, DType::F32)); },
               "[matmul]", {"batch dims", "(2, 4, 3)", "(3, 3, 2)"});
  expect_error([&] { ops::matmul(a, Tensor::zeros({3, 2}, DType::F32), opts(false, false, 1.f,
                                                                            Tensor::zeros({3}, DType::F32))); },
               "[matmul]", {"bias", "(3,)"});
  expect_error([&] { ops::matmul(a, Tensor::zeros({3, 2}, DType::F32), opts(false, false, 1.f,
                                                                            Tensor::zeros({2}, DType::F64))); },
               "[matmul]", {"bias", "f64"});
  expect_error([&] { ops::matmul(Tensor::zeros({4, 3}, DType::I32), Tensor::zeros({3, 2}, DType::I32)); },
               "[matmul]", {"i32"});
  // Every other column: neither row- nor column-major.
  const Tensor every_other = Tensor::zeros({4, 3, 2}, DType::F32).select(2, 0);  // (4, 3) strides (6, 2)
  expect_error([&] { ops::matmul(every_other, Tensor::zeros({3, 2}, DType::F32)); }, "[matmul]",
               {"strides", ".contiguous()"});
  Tensor out = Tensor::zeros({4, 3}, DType::F32);
  expect_error([&] { ops::matmul_out(a, Tensor::zeros({3, 2}, DType::F32), out); }, "[matmul]",
               {"output", "(4, 3)", "(4, 2)"});
  Tensor out_t = Tensor::zeros({2, 4}, DType::F32).transpose(0, 1);
  expect_error([&] { ops::matmul_out(a, Tensor::zeros({3, 2}, DType::F32), out_t); }, "[matmul]",
               {"output", "strides"});
}

// ---- CUDA against the CPU ----

struct CudaCase {
  Shape a, b;
  bool ta, tb;
  bool bias;
};

TEST(MatmulCuda, MatchesCpuAcrossDtypesShapesAndFlags) {
  FT_REQUIRE_CUDA();
  const std::vector<CudaCase> cases = {
      {{64, 96}, {96, 80}, false, false, false},     {{64, 96}, {80, 96}, false, true, true},
      {{96, 64}, {96, 80}, true, false, true},       {{96, 64}, {80, 96}, true, true, false},
      {{2, 33, 40}, {24, 40}, false, true, true},    // (B, T, C) . w^T + b, folded
      {{3, 17, 24}, {3, 24, 9}, false, false, false},  // batched, odd sizes
      {{3, 24, 17}, {9, 24}, true, true, false},     // broadcast b, issued per batch entry
      {{17, 24}, {3, 24, 9}, false, false, false},   // broadcast a
      {{2, 2, 16, 8}, {2, 2, 16, 8}, false, true, false},  // two batch dims
  };
  uint64_t seed = 100;
  for (const CudaCase& c : cases) {
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const Tensor a = randn_tensor(c.a, seed++, dt), b = randn_tensor(c.b, seed++, dt);
      const int64_t n = c.tb ? c.b[c.b.size() - 2] : c.b.back();
      const Tensor bias = c.bias ? randn_tensor({n}, seed++, dt) : Tensor();
      const Tensor want = ops::matmul(a, b, opts(c.ta, c.tb, 0.75f, bias));
      const Tensor got = ops::matmul(a.to(Device::cuda()), b.to(Device::cuda()),
                                     opts(c.ta, c.tb, 0.75f, c.bias ? bias.to(Device::cuda()) : Tensor()));
      ASSERT_EQ(got.shape(), want.shape());
      ASSERT_TRUE(got.is_cuda());
      // f32: fp32 accumulation in another order (K <= 96 terms): ~1e-6. bf16/f16: both sides
      // accumulate in fp32 and round once; a rounding boundary may fall either way, so up to one
      // ulp (2^-8 for bf16) on some elements.
      const double tol = dt == DType::F32 ? 1e-5 : (dt == DType::BF16 ? 8e-3 : 2e-3);
      EXPECT_LT(rel_error(got, want), tol) << dt << " a" << c.a << " b" << c.b << " ta=" << c.ta
                                           << " tb=" << c.tb;
    }
  }
}

TEST(MatmulCuda, Tf32IsOptIn) {
  FT_REQUIRE_CUDA();
  const Tensor a = randn_tensor({128, 256}, 200), b = randn_tensor({256, 64}, 201);
  const Tensor want = ops::matmul(a, b);
  const Tensor ga = a.to(Device::cuda()), gb = b.to(Device::cuda());
  const double exact = rel_error(ops::matmul(ga, gb), want);
  ops::MatmulOptions o;
  o.allow_tf32 = true;
  const double tf32 = rel_error(ops::matmul(ga, gb, o), want);
  EXPECT_LT(exact, 1e-5);  // default f32: no TF32 rounding of the inputs
  EXPECT_LT(tf32, 5e-3);   // 10-bit mantissa inputs, fp32 accumulation
}

TEST(MatmulCuda, AccumulateStridedAndMisalignedOperands) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  for (DType dt : {DType::F32, DType::BF16}) {
    // Operands starting one element into a buffer (2- or 4-byte aligned only) with odd row
    // strides: the plan must be built for the real alignment.
    const Tensor abuf = randn_tensor({37, 21}, 300, dt), bbuf = randn_tensor({37, 13}, 301, dt);
    const Tensor a = abuf.slice(1, 1, 21), b = bbuf.slice(1, 1, 12);  // (37, 20), (37, 11)
    Tensor dw = randn_tensor({20, 11}, 302, dt);
    Tensor dw_gpu = dw.to(gpu);
    ops::matmul_out(a, b, dw, opts(true, false), true);
    ops::matmul_out(a.to(gpu).contiguous(), b.to(gpu), dw_gpu, opts(true, false), true);
    ops::matmul_out(abuf.to(gpu).slice(1, 1, 21), bbuf.to(gpu).slice(1, 1, 12), dw_gpu, opts(true, false), true);
    ops::matmul_out(a, b, dw, opts(true, false), true);
    const double tol = dt == DType::F32 ? 1e-5 : 1.5e-2;  // bf16: three roundings of the sum
    EXPECT_LT(rel_error(dw_gpu, dw), tol) << dt;
  }
}

// align_rows: an output whose rows are not a multiple of 16 bytes (N = 13, 50257 columns of bf16)
// comes back as the first N columns of a wider buffer, values as the CPU product; one whose rows
// are (N = 16) stays contiguous.
TEST(MatmulCuda, AlignRowsPadsTheOutputRowStride) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  for (int64_t n : {13, 50257, 16}) {
    const Tensor a = randn_tensor({2, 5, 24}, 310, DType::BF16), w = randn_tensor({n, 24}, 311, DType::BF16);
    MatmulOptions o = opts(false, true);
    o.align_rows = true;
    const Tensor got = ops::matmul(a.to(gpu), w.to(gpu), o);  // (2, 5, n), x w^T as the GPT head
    ASSERT_EQ(got.shape(), (Shape{2, 5, n}));
    EXPECT_EQ(got.stride(-2) % 8, 0) << n;
    EXPECT_EQ(got.is_contiguous(), n % 8 == 0) << n;
    EXPECT_TRUE(rows_collapse(got)) << n;
    EXPECT_LT(rel_error(got, ops::matmul(a, w, opts(false, true))), 1e-2) << n;
  }
}

TEST(MatmulCuda, HalfInputsWithF32OutputAndBias) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const Tensor x = randn_tensor({2, 40, 32}, 500, DType::BF16), w = randn_tensor({24, 32}, 501, DType::BF16);
  const Tensor bias = randn_tensor({24}, 502);  // f32, like the output
  Tensor want = randn_tensor({2, 40, 24}, 503), got = want.to(gpu);
  ops::matmul_out(x, w, want, opts(false, true, 1.f, bias), true);
  ops::matmul_out(x.to(gpu), w.to(gpu), got, opts(false, true, 1.f, bias.to(gpu)), true);
  EXPECT_LT(rel_error(got, want), 1e-5);  // exact products, fp32 sums in another order
}

TEST(MatmulCuda, CachedPlanTakesEachCallsBias) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const Tensor x = randn_tensor({32, 16}, 400), w = randn_tensor({24, 16}, 401);
  for (uint64_t s = 0; s < 3; ++s) {
    const Tensor bias = randn_tensor({24}, 402 + s);
    const Tensor want = ops::matmul(x, w, opts(false, true, 1.f, bias));
    const Tensor got = ops::matmul(x.to(gpu), w.to(gpu), opts(false, true, 1.f, bias.to(gpu)));
    EXPECT_LT(rel_error(got, want), 1e-5) << "bias " << s;
  }
}

TEST(MatmulCuda, BadInputs) {
  FT_REQUIRE_CUDA();
  const Tensor a = Tensor::zeros({4, 3}, DType::F32);
  expect_error([&] { ops::matmul(a, Tensor::zeros({3, 2}, DType::F32, Device::cuda())); }, "[matmul]",
               {"devices", "cpu", "cuda:0"});
  const Tensor g = Tensor::zeros({4, 3}, DType::F32, Device::cuda());
  expect_error([&] { ops::matmul(g, g, opts(false, true, 1.f, Tensor::zeros({4}, DType::F32))); }, "[matmul]",
               {"bias", "cpu"});
}

// ---- alpha_scale: the product scaled by a one-element tensor read when the product runs ----

ops::MatmulOptions scaled(bool ta, bool tb, const Tensor& alpha_scale) {
  ops::MatmulOptions o = opts(ta, tb);
  o.alpha_scale = alpha_scale;
  return o;
}

// f64 keeps the factor's double precision (0.3 is not a float); accumulate keeps what was there.
TEST(Matmul, CpuAlphaScaleScalesTheProductOnly) {
  for (DType dt : {DType::F64, DType::F32}) {
    const Tensor a = randn_tensor({9, 4}, 600, dt), g = randn_tensor({9, 3}, 601, dt);
    const Tensor s = Tensor::full({1}, 0.3, dt);
    const double tol = dt == DType::F64 ? 1e-14 : 1e-6;
    EXPECT_LT(rel_error(ops::matmul(g, a, scaled(true, false, s)).to_doubles(), naive_matmul(g, a, true, false, 0.3)),
              tol)
        << dt;
    Tensor dw = randn_tensor({3, 4}, 602, dt);
    const auto before = dw.to_doubles();
    ops::matmul_out(g, a, dw, scaled(true, false, s), /*accumulate=*/true);
    EXPECT_LT(rel_error(dw.to_doubles(), naive_matmul(g, a, true, false, 0.3, Tensor(), before)), tol) << dt;
  }
  const Tensor a = randn_tensor({6, 16}, 603, DType::BF16), b = randn_tensor({16, 8}, 604, DType::BF16);
  EXPECT_LT(rel_error(ops::matmul(a, b, scaled(false, false, Tensor::full({}, -2.5, DType::F32))).to_doubles(),
                      naive_matmul(a, b, false, false, -2.5)),
            4e-3);  // half dtypes: in f32, one rounding
}

TEST(Matmul, AlphaScaleBadInputs) {
  const Tensor a = Tensor::zeros({4, 3}, DType::F32);
  expect_error([&] { ops::matmul(a, a, scaled(false, true, Tensor::zeros({2}, DType::F32))); }, "[matmul]",
               {"alpha_scale", "(2,)"});
  expect_error([&] { ops::matmul(a, a, scaled(false, true, Tensor::zeros({1}, DType::I32))); }, "[matmul]",
               {"alpha_scale"});
  ops::MatmulOptions both = scaled(false, true, Tensor::zeros({1}, DType::F32));
  both.alpha = 2.f;
  expect_error([&] { ops::matmul(a, a, both); }, "[matmul]", {"alpha_scale", "alpha"});
}

// Device pointer mode: alpha and beta (0 overwrite, 1 accumulate) from device memory, for f32 and
// bf16 (f32 output), against the CPU product with the same factor.
TEST(MatmulCuda, AlphaScaleFromDeviceMemory) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  for (DType dt : {DType::F32, DType::BF16}) {
    const Tensor g = randn_tensor({64, 24}, 610, dt), x = randn_tensor({64, 32}, 611, dt);
    const Tensor s = Tensor::full({}, 0.375, DType::F32);
    const Tensor want = ops::matmul(g, x, scaled(true, false, s));  // (24, 32) = 0.375 g^T x
    EXPECT_LT(rel_error(ops::matmul(g.to(gpu), x.to(gpu), scaled(true, false, s.to(gpu))), want),
              dt == DType::F32 ? 1e-5 : 1e-2)
        << dt;
    // beta 0 read from device memory still means "C is not read": NaN there must not leak in
    // (fresh outputs come from the caching allocator with whatever bits they held).
    Tensor over_nan = Tensor::full({24, 32}, std::nan(""), DType::F32, gpu);
    ops::matmul_out(g.to(gpu), x.to(gpu), over_nan, scaled(true, false, s.to(gpu)));
    EXPECT_LT(rel_error(over_nan, want), dt == DType::F32 ? 1e-5 : 1e-2) << dt << " output held NaN before";
    Tensor acc = randn_tensor({24, 32}, 612), acc_gpu = acc.to(gpu);
    ops::matmul_out(g, x, acc, scaled(true, false, s), true);
    ops::matmul_out(g.to(gpu), x.to(gpu), acc_gpu, scaled(true, false, s.to(gpu)), true);
    EXPECT_LT(rel_error(acc_gpu, acc), 1e-5) << dt << " accumulate into f32 (beta 1 from device memory)";
  }
}

// The factor is read when the product runs: a captured product replays with the value the
// factor's memory holds at each replay (what a graph-captured training step needs).
TEST(MatmulCuda, AlphaScaleIsReadAtReplay) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda();
  const Tensor a = randn_tensor({32, 16}, 620), b = randn_tensor({24, 16}, 621);
  const Tensor ag = a.to(gpu), bg = b.to(gpu);
  Tensor s = Tensor::full({1}, 1.0, DType::F32, gpu);
  Tensor out = Tensor::zeros({32, 24}, DType::F32, gpu);
  ops::matmul_out(ag, bg, out, scaled(false, true, s));  // eager first: the plan exists before capture
  cuda::Graph graph(gpu.index);
  graph.capture([&] { ops::matmul_out(ag, bg, out, scaled(false, true, s)); });
  for (double f : {2.0, -0.5}) {
    s.fill_(f);
    graph.replay();
    EXPECT_LT(rel_error(out.to_doubles(), naive_matmul(a, b, false, true, f)), 1e-5) << f;
  }
}

}  // namespace
}  // namespace ft
