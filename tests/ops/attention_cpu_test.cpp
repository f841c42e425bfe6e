// CPU tests of the attention algorithms (no GPU): the float64 reference against finite
// differences, the tiled flash algorithm against the float64 reference (within 2x the error of
// naive attention in the same precision), block-sparse and fully masked rows, and the dropout mask.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dropout_mask.h"
#include "ops/cpu/attention_reference.h"
#include "tests/ops/attention_test_util.h"

namespace ft {
namespace {

using namespace testing_attention;

// The tile shapes of the CUDA kernels (D = 64); other shapes must give the same function.
constexpr int kBlockM = 128, kBlockN = 64;

Outputs run_flash_tiled(const AttentionParams& cfg, const AttentionInputs& in, int bm = kBlockM,
                        int bn = kBlockN) {
  const size_t n = in.q.size();
  Outputs out{std::vector<float>(n), std::vector<float>(static_cast<size_t>(cfg.B) * cfg.H * cfg.T),
              std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  cpu::flash_tiled_forward(cfg, bm, bn, in.q.data(), in.k.data(), in.v.data(), out.o.data(),
                           out.lse.data());
  cpu::flash_tiled_backward(cfg, bm, bn, in.q.data(), in.k.data(), in.v.data(), out.o.data(),
                            out.lse.data(), in.dout.data(), out.dq.data(), out.dk.data(),
                            out.dv.data());
  return out;
}

Outputs run_naive_lowp(const AttentionParams& cfg, const AttentionInputs& in) {
  const size_t n = in.q.size();
  Outputs out{std::vector<float>(n), std::vector<float>(static_cast<size_t>(cfg.B) * cfg.H * cfg.T),
              std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  cpu::naive_lowp_forward(cfg, in.q.data(), in.k.data(), in.v.data(), out.o.data(), out.lse.data());
  cpu::naive_lowp_backward(cfg, in.q.data(), in.k.data(), in.v.data(), in.dout.data(),
                           out.dq.data(), out.dk.data(), out.dv.data());
  return out;
}

// Flash error <= 2 x naive error (+ a floor for outputs that are exactly representable).
void expect_within_twice_naive(const Outputs& flash, const Outputs& naive, const Reference& ref,
                               const std::string& name) {
  const char* names[] = {"o", "dq", "dk", "dv"};
  const std::vector<float>* f[] = {&flash.o, &flash.dq, &flash.dk, &flash.dv};
  const std::vector<float>* nv[] = {&naive.o, &naive.dq, &naive.dk, &naive.dv};
  const std::vector<double>* r[] = {&ref.o, &ref.dq, &ref.dk, &ref.dv};
  for (int i = 0; i < 4; ++i) {
    if (identically_zero(*r[i])) {
      // T = 1: dq = dk = 0 exactly. Flash's D = rowsum(dO o O) uses the rounded O, so it returns
      // rounding noise (as FlashAttention-2 does); bound it absolutely instead.
      EXPECT_LE(rms(*f[i]), 0.05) << name << " " << names[i];
      continue;
    }
    const double ef = rel_error(*f[i], *r[i]), en = rel_error(*nv[i], *r[i]);
    EXPECT_LE(ef, 2 * en + 1e-5) << name << " " << names[i] << ": flash " << ef << " naive " << en;
  }
  EXPECT_LE(lse_error(flash.lse, ref.lse), 1e-4) << name << " lse";
}

class FlashTiledVsReference : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(FlashTiledVsReference, WithinTwiceNaiveError) {
  const AttentionCase c = GetParam();
  const AttentionParams cfg = config_of(c);
  const AttentionInputs in = make_inputs(c, 17u + c.T);
  const Reference ref = reference_of(cfg, in);
  expect_within_twice_naive(run_flash_tiled(cfg, in), run_naive_lowp(cfg, in), ref, case_name(c));
}

std::vector<AttentionCase> tiled_cases() {
  std::vector<AttentionCase> cases;
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f, 0.5f})
      for (int T : {1, 17, 64, 127})
        for (int D : {64, 128}) cases.push_back({T < 64 ? 2 : 1, 2, T, D, causal, p});
  cases.push_back({1, 1, 300, 64, true, 0.1f, AttentionDType::kF16});
  cases.push_back({1, 1, 200, 128, false, 0.f, AttentionDType::kF16});
  // Block-sparse: window + global blocks, block sizes smaller and larger than the tiles.
  cases.push_back({1, 2, 200, 64, true, 0.f, AttentionDType::kBF16, 16, 2, 1});
  cases.push_back({1, 1, 300, 64, true, 0.1f, AttentionDType::kBF16, 32, 3, 2});
  cases.push_back({1, 1, 300, 64, false, 0.f, AttentionDType::kBF16, 64, 1, 1});
  cases.push_back({1, 1, 260, 64, true, 0.f, AttentionDType::kBF16, 128, 1, 0});
  // D = 256.
  for (bool causal : {false, true})
    for (float p : {0.f, 0.1f})
      for (int T : {1, 17, 127}) cases.push_back({T < 64 ? 2 : 1, 2, T, 256, causal, p});
  cases.push_back({1, 1, 300, 256, true, 0.1f, AttentionDType::kF16});
  cases.push_back({1, 1, 300, 256, true, 0.1f, AttentionDType::kBF16, 32, 3, 2});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, FlashTiledVsReference, ::testing::ValuesIn(tiled_cases()),
                         [](const auto& info) { return case_name(info.param); });

// D = 256 through the CUDA kernels' D = 256 tile shapes (flash_launch.cuh): forward 128 x 32,
// backward 64 x 64; T = 300 leaves partial tiles of both.
TEST(FlashTiled, HeadDim256TilesWithinTwiceNaiveError) {
  for (float p : {0.f, 0.5f}) {
    const AttentionCase c{1, 2, 300, 256, true, p};
    const AttentionParams cfg = config_of(c);
    const AttentionInputs in = make_inputs(c, 31);
    const Reference ref = reference_of(cfg, in);
    const Outputs naive = run_naive_lowp(cfg, in);
    expect_within_twice_naive(run_flash_tiled(cfg, in, 128, 32), naive, ref, case_name(c) + " 128x32");
    expect_within_twice_naive(run_flash_tiled(cfg, in, 64, 64), naive, ref, case_name(c) + " 64x64");
  }
}

TEST(FlashTiled, TilingDoesNotChangeTheFunction) {
  const AttentionCase c{1, 2, 150, 64, true, 0.1f, AttentionDType::kBF16, 32, 2, 1};
  const AttentionParams cfg = config_of(c);
  const AttentionInputs in = make_inputs(c, 5);
  const Reference ref = reference_of(cfg, in);
  const Outputs a = run_flash_tiled(cfg, in, 128, 64), b = run_flash_tiled(cfg, in, 16, 32);
  // Different tilings round differently but compute the same function (same mask, same dropout).
  EXPECT_LT(rel_error(a.o, ref.o), 1e-2);
  EXPECT_LT(rel_error(b.o, ref.o), 1e-2);
  EXPECT_LT(rel_error(a.dk, ref.dk), 2e-2);
  EXPECT_LT(rel_error(b.dk, ref.dk), 2e-2);
}

TEST(FlashTiled, FullyMaskedRowsGiveZerosNotNaN) {
  // window 0, no global block: no query sees any key.
  const AttentionCase c{1, 1, 70, 64, false, 0.1f, AttentionDType::kBF16, 16, 0, 0};
  const AttentionParams cfg = config_of(c);
  const AttentionInputs in = make_inputs(c, 9);
  const Outputs out = run_flash_tiled(cfg, in);
  for (float x : out.o) ASSERT_EQ(x, 0.f);
  for (float x : out.lse) ASSERT_TRUE(std::isinf(x) && x < 0);
  for (const auto* g : {&out.dq, &out.dk, &out.dv})
    for (float x : *g) ASSERT_EQ(x, 0.f);
}

TEST(AttentionReference, BackwardMatchesFiniteDifferences) {
  for (float p : {0.f, 0.3f}) {
    const AttentionCase c{1, 2, 7, 5, true, p};
    AttentionParams cfg = config_of(c);
    const size_t n = static_cast<size_t>(c.B) * c.T * c.H * c.D;
    const auto q = to_double(random_values(n, 1, 1.f, c.dtype));
    const auto k = to_double(random_values(n, 2, 1.f, c.dtype));
    const auto v = to_double(random_values(n, 3, 1.f, c.dtype));
    const auto w = to_double(random_values(n, 4, 1.f, c.dtype));  // loss = sum(w * o)
    std::vector<double> dq(n), dk(n), dv(n), o(n), lse(c.B * c.H * c.T);
    cpu::attention_reference_backward(cfg, q.data(), k.data(), v.data(), w.data(), dq.data(),
                                      dk.data(), dv.data());
    auto loss = [&](const std::vector<double>& qq, const std::vector<double>& kk,
                    const std::vector<double>& vv) {
      cpu::attention_reference_forward(cfg, qq.data(), kk.data(), vv.data(), o.data(), lse.data());
      double s = 0;
      for (size_t i = 0; i < n; ++i) s += w[i] * o[i];
      return s;
    };
    const double h = 1e-6;
    const std::vector<double>* x[] = {&q, &k, &v};
    const std::vector<double>* g[] = {&dq, &dk, &dv};
    for (int which = 0; which < 3; ++which)
      for (size_t i = 0; i < n; i += 3) {
        std::vector<double> a[3] = {q, k, v}, b[3] = {q, k, v};
        a[which][i] += h;
        b[which][i] -= h;
        const double fd = (loss(a[0], a[1], a[2]) - loss(b[0], b[1], b[2])) / (2 * h);
        EXPECT_NEAR(fd, (*g[which])[i], 1e-6) << "input " << which << " element " << i << " p " << p;
        (void)x;
      }
  }
}

TEST(DropoutMask, DroppedFractionWithinBinomialTolerance) {
  for (float p : {0.1f, 0.5f}) {
    const DropoutParams d = make_dropout_params(PhiloxState{42, 7}, p);
    int64_t dropped = 0, n = 0;
    for (uint64_t slice = 0; slice < 4; ++slice)
      for (uint32_t row = 0; row < 256; ++row)
        for (uint32_t col = 0; col < 256; ++col, ++n) dropped += !dropout_keep_at(d, slice, row, col);
    const double frac = static_cast<double>(dropped) / n;
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(frac, p, 5 * sigma) << "p " << p;
  }
}

}  // namespace
}  // namespace ft
