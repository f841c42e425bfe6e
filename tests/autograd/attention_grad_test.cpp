// autograd::attention on a fused qkv buffer: float64 finite differences on the CPU (flash and naive,
// causal and not, with and without dropout, dense and block-sparse), one dqkv gradient, and the
// replay of the dropout mask from the saved PhiloxState.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "autograd/functions/attention.h"
#include "autograd/functions/elementwise.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "ops/document_mask.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

struct GradCase {
  bool flash, causal;
  float p;
  int block_size, window_blocks, global_blocks;
};

TEST(AttentionGrad, Float64Gradcheck) {
  const GradCase cases[] = {
      {true, true, 0.f, 0, 0, 0},  {false, true, 0.f, 0, 0, 0},  {true, false, 0.f, 0, 0, 0},
      {true, true, 0.3f, 0, 0, 0}, {false, true, 0.3f, 0, 0, 0}, {true, false, 0.5f, 0, 0, 0},
      {true, true, 0.2f, 2, 1, 1},  // block-sparse: window 1 block plus the first block
  };
  for (const GradCase& c : cases) {
    const int B = 2, T = 5, H = 2, D = 3;
    ops::AttentionOptions o;
    o.causal = c.causal;
    o.dropout_p = c.p;
    o.philox = {2024, 7};
    o.block_size = c.block_size;
    o.window_blocks = c.window_blocks;
    o.global_blocks = c.global_blocks;
    const auto fn = [&](const std::vector<Tensor>& in) { return attention(in[0], H, o, c.flash); };
    const GradcheckResult r = gradcheck(fn, {randn_tensor({B, T, 3 * H * D}, 3)});
    EXPECT_TRUE(r.ok) << "flash " << c.flash << " causal " << c.causal << " p " << c.p << " block "
                      << c.block_size << ": " << r.message;
  }
}

// The document mask (ops/document_mask.h): row 0 holds documents from 0, 2 and 4, row 1 one
// document; flash and naive, with and without dropout, and with a block-sparse pattern on top.
TEST(AttentionGrad, Float64GradcheckWithDocumentMask) {
  const int B = 2, T = 6, H = 2, D = 3;
  const int32_t e = ops::kGpt2EotToken;
  const Tensor tokens = Tensor::from_vector(std::vector<int32_t>{5, 6, e, 7, e, 8, 1, 2, 3, 4, 5, 6}, {B, T});
  for (const GradCase& c : {GradCase{true, true, 0.f, 0, 0, 0}, GradCase{false, true, 0.f, 0, 0, 0},
                            GradCase{true, true, 0.3f, 0, 0, 0}, GradCase{true, true, 0.f, 2, 1, 1}}) {
    ops::AttentionOptions o;
    o.dropout_p = c.p;
    o.philox = {99, 1};
    o.block_size = c.block_size;
    o.window_blocks = c.window_blocks;
    o.global_blocks = c.global_blocks;
    o.doc_start = ops::document_starts(tokens);
    const auto fn = [&](const std::vector<Tensor>& in) { return attention(in[0], H, o, c.flash); };
    const GradcheckResult r = gradcheck(fn, {randn_tensor({B, T, 3 * H * D}, 13)});
    EXPECT_TRUE(r.ok) << "flash " << c.flash << " p " << c.p << " block " << c.block_size << ": " << r.message;
  }
}

TEST(AttentionGrad, OutputIsBTCAndGradientIsOneDqkvBuffer) {
  const int B = 2, T = 4, H = 2, D = 4;
  const Tensor qkv = randn_tensor({B, T, 3 * H * D}, 5, DType::F64);
  set_requires_grad(qkv);
  const Tensor y = attention(qkv, H, {}, true);
  EXPECT_EQ(y.shape(), Shape({B, T, H * D}));
  EXPECT_EQ(grad_fn(y)->name(), std::string("FlashAttentionBackward"));
  backward(y, randn_tensor({B, T, H * D}, 6, DType::F64));
  const Tensor g = grad(qkv);
  ASSERT_TRUE(g.defined());
  EXPECT_EQ(g.shape(), qkv.shape());
  // Query 0 attends only to key 0 (causal): its output is v_0 whatever q_0 is, so dq of row 0 is 0.
  const Tensor dq0 = g.select(1, 0).slice(1, 0, H * D);
  for (double x : dq0.to_doubles()) EXPECT_EQ(x, 0.0);
}

// A backward long after the forward, with other draws in between, still replays the forward's mask:
// the node holds the state, not a generator.
TEST(AttentionGrad, DropoutReplaysTheSavedStateAndFlashEqualsNaive) {
  const int B = 1, T = 9, H = 2, D = 4;
  ops::AttentionOptions o;
  o.dropout_p = 0.4f;
  o.philox = {11, 3};
  Tensor grads[2];
  Tensor outs[2];
  for (int flash = 0; flash < 2; ++flash) {
    const Tensor qkv = randn_tensor({B, T, 3 * H * D}, 8, DType::F64);
    set_requires_grad(qkv);
    outs[flash] = attention(qkv, H, o, flash == 1);
    ops::AttentionOptions other = o;
    other.philox = {12, 0};
    (void)attention(qkv, H, other, flash == 1);  // an unrelated call in between
    backward(outs[flash], Tensor::full({B, T, H * D}, 1.0, DType::F64));
    grads[flash] = grad(qkv);
  }
  EXPECT_EQ(test::max_abs_diff(outs[0], outs[1]), 0.0);
  EXPECT_EQ(test::max_abs_diff(grads[0], grads[1]), 0.0);
}

// opts.deterministic reaches the flash backward through the node: two backward passes of the same
// graph inputs on a GPU give the same gradient bits (T = 1000: 16 key blocks add into each dQ row).
TEST(AttentionGrad, DeterministicFlashGradientIsBitIdenticalOnGpu) {
  FT_REQUIRE_CUDA();
  const int B = 2, T = 1000, H = 4, D = 64;
  ops::AttentionOptions o;
  o.dropout_p = 0.1f;
  o.philox = {5, 1};
  o.deterministic = true;
  Tensor grads[2];
  for (int run = 0; run < 2; ++run) {
    const Tensor qkv = randn_tensor({B, T, 3 * H * D}, 21, DType::BF16, Device::cuda());
    set_requires_grad(qkv);
    const Tensor y = attention(qkv, H, o, true);
    backward(y, randn_tensor({B, T, H * D}, 22, DType::BF16, Device::cuda()));
    grads[run] = grad(qkv);
  }
  ASSERT_TRUE(grads[0].defined() && grads[1].defined());
  EXPECT_EQ(test::max_abs_diff(grads[0], grads[1]), 0.0);
}

TEST(AttentionGrad, RejectsAQkvThatDoesNotSplitIntoHeads) {
  const Tensor qkv = randn_tensor({1, 4, 10}, 9);
  EXPECT_THROW(attention(qkv, 2, {}, true), Error);
  // (B, T, (H + 2 H_kv) D) with H = 4, H_kv = 3: 3 does not divide 4.
  const std::string e = test::error_of([&] { attention(randn_tensor({1, 4, 20}, 9), 4, {}, true, 3); });
  EXPECT_NE(e.find("n_heads = 4 must be a multiple of n_kv_heads = 3"), std::string::npos) << e;
  EXPECT_THROW(attention(randn_tensor({1, 4, 21}, 9), 4, {}, true, 2), Error);  // 21 is not 8 D
}

// Grouped-query (H = 4, H_kv = 2) and multi-query (H_kv = 1) attention: float64 finite differences
// through the fused (B, T, (H + 2 H_kv) D) buffer, flash and naive, with and without dropout.
TEST(AttentionGrad, GroupedQueryFloat64Gradcheck) {
  const int B = 2, T = 5, H = 4, D = 3;
  for (const int H_kv : {2, 1})
    for (const bool flash : {true, false})
      for (const float p : {0.f, 0.3f}) {
        ops::AttentionOptions o;
        o.dropout_p = p;
        o.philox = {2024, 7};
        const auto fn = [&](const std::vector<Tensor>& in) { return attention(in[0], H, o, flash, H_kv); };
        const GradcheckResult r = gradcheck(fn, {randn_tensor({B, T, (H + 2 * H_kv) * D}, 31)});
        EXPECT_TRUE(r.ok) << "H_kv " << H_kv << " flash " << flash << " p " << p << ": " << r.message;
      }
}

TEST(AttentionGrad, GroupedQueryOutputIsBTHDAndGradientIsShapedLikeQkv) {
  const int B = 2, T = 4, H = 4, H_kv = 2, D = 4;
  const Tensor qkv = randn_tensor({B, T, (H + 2 * H_kv) * D}, 32, DType::F64);
  set_requires_grad(qkv);
  const Tensor y = attention(qkv, H, {}, true, H_kv);
  EXPECT_EQ(y.shape(), Shape({B, T, H * D}));
  backward(y, randn_tensor({B, T, H * D}, 33, DType::F64));
  ASSERT_TRUE(grad(qkv).defined());
  EXPECT_EQ(grad(qkv).shape(), qkv.shape());
}

}  // namespace
}  // namespace ft::autograd
