#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/dropout_mask.h"
#include "ops/dropout.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::expect_error;

using test::randn_tensor;

// The mask as the spec states it: x viewed as (numel / last_dim, last_dim), slice 0.
std::vector<bool> reference_mask(const Shape& shape, float p, PhiloxState state) {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t rows = shape_numel(shape) / cols;
  const DropoutParams d = make_dropout_params(state, p);
  std::vector<bool> keep;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      keep.push_back(dropout_keep_at(d, 0, static_cast<uint32_t>(r), static_cast<uint32_t>(c)));
  return keep;
}

TEST(Dropout, CpuAppliesTheSpecifiedMaskAndScale) {
  const PhiloxState state{1234, 7};
  const float p = 0.3f;
  for (const Shape& shape : {Shape{5, 37}, Shape{2, 3, 16}, Shape{11}}) {
    const Tensor x = randn_tensor(shape, 1);
    const auto y = ops::dropout(x, p, state).to_floats(), xv = x.to_floats();
    const auto keep = reference_mask(shape, p, state);
    const float scale = 1.f / (1.f - p);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], keep[i] ? xv[i] * scale : 0.f) << shape << " " << i;
  }
}

TEST(Dropout, DroppedFractionIsWithinBinomialNoise) {
  const int64_t n = 512 * 768;
  const Tensor ones = Tensor::full({512, 768}, 1.0, DType::F32);
  for (float p : {0.1f, 0.5f}) {
    const auto y = ops::dropout(ones, p, PhiloxState{42, 0}).to_floats();
    int64_t dropped = 0;
    for (float v : y) dropped += v == 0.f;
    // 5 standard deviations of Binomial(n, p): fails by chance with probability ~6e-7.
    const double sigma = std::sqrt(n * p * (1.0 - p));
    EXPECT_NEAR(static_cast<double>(dropped), n * p, 5 * sigma) << "p=" << p;
  }
}

TEST(Dropout, StateSelectsTheMaskAndBackwardReplaysIt) {
  const Tensor x = randn_tensor({64, 40}, 2);
  const PhiloxState s{9, 100};
  const auto y1 = ops::dropout(x, 0.2f, s).to_floats();
  EXPECT_EQ(y1, ops::dropout(x, 0.2f, s).to_floats());
  EXPECT_NE(y1, ops::dropout(x, 0.2f, PhiloxState{9, 101}).to_floats());  // the next offset
  EXPECT_NE(y1, ops::dropout(x, 0.2f, PhiloxState{10, 100}).to_floats());
  // Backward: the same mask and scale applied to dy.
  const Tensor dy = randn_tensor({64, 40}, 3);
  const auto dx = ops::dropout_backward(dy, 0.2f, s).to_floats(), dyv = dy.to_floats();
  const auto keep = reference_mask({64, 40}, 0.2f, s);
  for (size_t i = 0; i < dx.size(); ++i) {
    EXPECT_EQ(dx[i], keep[i] ? dyv[i] * (1.f / (1.f - 0.2f)) : 0.f);
    EXPECT_EQ(y1[i] == 0.f, !keep[i]);
  }
}

TEST(Dropout, EdgeProbabilitiesAndHalfDtypes) {
  const Tensor x = randn_tensor({8, 24}, 4);
  EXPECT_EQ(ops::dropout(x, 0.f, PhiloxState{1, 0}).to_floats(), x.to_floats());
  for (float v : ops::dropout(x, 1.f, PhiloxState{1, 0}).to_floats()) EXPECT_EQ(v, 0.f);
  const Tensor h = randn_tensor({8, 24}, 5, DType::BF16);
  const auto y = ops::dropout(h, 0.25f, PhiloxState{3, 3});
  ASSERT_EQ(y.dtype(), DType::BF16);
  const auto yv = y.to_floats(), hv = h.to_floats();
  const auto keep = reference_mask({8, 24}, 0.25f, PhiloxState{3, 3});
  for (size_t i = 0; i < yv.size(); ++i)
    EXPECT_EQ(yv[i], keep[i] ? bf16_to_float(float_to_bf16(hv[i] * (1.f / 0.75f))) : 0.f);
}

TEST(Dropout, BadInputsNameTheOp) {
  const Tensor x = Tensor::zeros({2, 3}, DType::F32);
  expect_error([&] { ops::dropout(x, 1.5f, PhiloxState{}); }, "[dropout]", {"1.5"});
  expect_error([&] { ops::dropout(x, -0.1f, PhiloxState{}); }, "[dropout]");
  expect_error([&] { ops::dropout(Tensor::zeros({2, 3}, DType::I32), 0.1f, PhiloxState{}); }, "[dropout]",
               {"i32"});
  expect_error([&] { ops::dropout_backward(Tensor(), 0.1f, PhiloxState{}); }, "[dropout_backward]");
}

TEST(DropoutCuda, MaskEqualsCpuBitForBit) {
  FT_REQUIRE_CUDA();
  const PhiloxState s{0xDEADBEEFCAFEull, (1ull << 32) + 5};  // exercises the high words of seed and offset
  uint64_t seed = 10;
  for (const Shape& shape : {Shape{128, 768}, Shape{33, 45}, Shape{4, 7, 64}, Shape{1001}}) {
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const Tensor x = randn_tensor(shape, seed++, dt);
      // Same fp32 multiply and one rounding on both sides: exact equality.
      EXPECT_EQ(ops::dropout(x.to(Device::cuda()), 0.1f, s).to_floats(), ops::dropout(x, 0.1f, s).to_floats())
          << shape << " " << dt;
      EXPECT_EQ(ops::dropout_backward(x.to(Device::cuda()), 0.1f, s).to_floats(),
                ops::dropout_backward(x, 0.1f, s).to_floats())
          << shape << " " << dt;
    }
  }
  // p = 0 (a copy on the GPU) and p = 1, and a tall tensor: more row pairs than one grid column of
  // CTAs covers (65535 x 4), so the kernel's grid-stride loop runs.
  const Tensor small = randn_tensor({40, 48}, 7, DType::BF16);
  for (float p : {0.f, 1.f})
    EXPECT_EQ(ops::dropout(small.to(Device::cuda()), p, s).to_floats(), ops::dropout(small, p, s).to_floats()) << p;
  const Tensor tall = randn_tensor({600000, 16}, 8, DType::BF16);
  EXPECT_EQ(ops::dropout(tall.to(Device::cuda()), 0.1f, s).to_floats(), ops::dropout(tall, 0.1f, s).to_floats());
  // A buffer starting one element in (not 16-byte aligned) takes the scalar path, same mask.
  const Tensor buf = randn_tensor({1 + 64 * 16}, 99);
  const Tensor x = buf.slice(0, 1, 1 + 64 * 16).view({64, 16});
  EXPECT_EQ(ops::dropout(buf.to(Device::cuda()).slice(0, 1, 1 + 64 * 16).view({64, 16}), 0.3f, s).to_floats(),
            ops::dropout(x, 0.3f, s).to_floats());
}

}  // namespace
}  // namespace ft
