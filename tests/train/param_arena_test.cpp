// The parameter arena and AdamW over it: layout (two regions, model leaves are views), gradients
// landing in the flat buffer, weight decay on the matrices only, and the bf16 working copy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "autograd/variable.h"
#include "nn/gpt.h"
#include "ops/elementwise.h"
#include "ops/grad_norm.h"
#include "tests/test_util.h"
#include "train/adamw.h"
#include "train/param_arena.h"

namespace ft {
namespace {

nn::GPTConfig small_model() {
  nn::GPTConfig c;
  c.vocab_size = 20;
  c.max_seq_len = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 8;
  c.d_ff = 16;
  c.dropout = 0.0;
  return c;
}

Tensor ids(int64_t B, int64_t T, int seed) {
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 7 + seed) % 20);
  return Tensor::from_vector(v, {B, T});
}

const char* ptr_of(const Tensor& t) { return static_cast<const char*>(t.data_ptr()); }

TEST(ParamArena, LeavesAreViewsInTwoRegionsWithTheModelValues) {
  nn::GPT model(small_model(), 3);
  std::vector<std::pair<std::string, std::vector<double>>> before;
  model.for_each_parameter([&](const std::string& n, const Tensor& p) { before.emplace_back(n, p.to_doubles()); });
  ParamArena arena(model, Device::cpu(), DType::F32);

  EXPECT_EQ(arena.num_parameters(), model.num_parameters());
  EXPECT_EQ(arena.decay_region().begin, 0);
  EXPECT_EQ(arena.decay_region().end, arena.no_decay_region().begin);
  EXPECT_EQ(arena.no_decay_region().end, arena.numel());
  const char* base = ptr_of(arena.master());
  size_t i = 0;
  model.for_each_parameter([&](const std::string& name, const Tensor& p) {
    const ParamArena::Entry& e = arena.entries()[i];
    EXPECT_EQ(e.name, name);
    EXPECT_EQ(e.decay, p.dim() >= 2) << name;
    const ParamArena::Region r = e.decay ? arena.decay_region() : arena.no_decay_region();
    EXPECT_GE(e.offset, r.begin) << name;
    EXPECT_LE(e.offset + p.numel(), r.end) << name;
    EXPECT_EQ(e.offset % ParamArena::kAlign, 0) << name;
    // The leaf is the master view itself (fp32), its gradient the grad arena's view.
    EXPECT_EQ(ptr_of(p), base + e.offset * 4) << name;
    EXPECT_TRUE(autograd::requires_grad(p)) << name;
    EXPECT_EQ(ptr_of(autograd::grad(p)), ptr_of(arena.grads()) + e.offset * 4) << name;
    EXPECT_EQ(p.to_doubles(), before[i].second) << name;
    ++i;
  });
  // Padding holds zeros: the sum of squares of the arena is that of the parameters.
  double arena_sq = 0, param_sq = 0;
  for (double x : arena.master().to_doubles()) arena_sq += x * x;
  for (const auto& [n, v] : before)
    for (double x : v) param_sq += x * x;
  EXPECT_NEAR(arena_sq, param_sq, 1e-9 * param_sq);
}

TEST(ParamArena, BackwardAddsIntoTheGradientArena) {
  // Reference: the same model without an arena, gradients from the engine's own buffers.
  nn::GPT ref(small_model(), 5), model(small_model(), 5);
  ParamArena arena(model, Device::cpu(), DType::F32);
  const Tensor x = ids(2, 8, 1), y = ids(2, 8, 2);
  autograd::backward(ref.forward(x, y).loss);
  autograd::backward(model.forward(x, y).loss);
  std::vector<Tensor> ref_grads;
  ref.for_each_parameter([&](const std::string&, const Tensor& p) { ref_grads.push_back(autograd::grad(p)); });
  size_t i = 0;
  for (const ParamArena::Entry& e : arena.entries()) {
    const Tensor g = arena.grads().slice(0, e.offset, e.offset + shape_numel(e.shape)).view(e.shape);
    EXPECT_LE(test::max_abs_diff(g, ref_grads[i]), 1e-7) << e.name;
    ++i;
  }
  // A second backward accumulates: the arena holds twice the gradient.
  const std::vector<double> once = arena.grads().to_doubles();
  autograd::backward(model.forward(x, y).loss);
  const std::vector<double> twice = arena.grads().to_doubles();
  for (size_t k = 0; k < once.size(); ++k) EXPECT_NEAR(twice[k], 2 * once[k], 1e-6 + 1e-5 * std::fabs(once[k]));
  arena.zero_grads();
  for (double v : arena.grads().to_doubles()) ASSERT_EQ(v, 0.0);
}

TEST(AdamW, WeightDecayReachesMatricesAndEmbeddingsOnly) {
  // With zero gradients AdamW's moment update is 0/(0+eps) = 0, so one step only decays:
  // p' = p (1 - lr wd) in the decay region, p' = p elsewhere.
  nn::GPT model(small_model(), 8);
  ParamArena arena(model, Device::cpu(), DType::F32);
  const std::vector<double> before = arena.master().to_doubles();
  AdamWConfig cfg;
  cfg.weight_decay = 0.5;
  AdamW opt(arena, cfg);
  opt.step(0.1, 1, 1.0, ops::grad_norm(arena.grads()).norm);
  const std::vector<double> after = arena.master().to_doubles();
  for (const ParamArena::Entry& e : arena.entries()) {
    const double factor = e.decay ? 1 - 0.1 * 0.5 : 1.0;
    for (int64_t k = e.offset; k < e.offset + shape_numel(e.shape); ++k)
      ASSERT_NEAR(after[k], before[k] * factor, 1e-7) << e.name;
  }
  EXPECT_NE(arena.entries()[0].decay, arena.entries()[2].decay);  // wte vs h.0.ln_1.weight: both kinds met
}

TEST(ParamArena, Bf16LeavesAreTheWorkingCopyRewrittenByAdamW) {
  nn::GPTConfig c = small_model();
  c.layernorm_fp32 = false;  // every leaf bf16 (the default keeps the LayerNorms' fp32: below)
  nn::GPT model(c, 9);
  ParamArena arena(model, Device::cpu(), DType::BF16);
  model.for_each_parameter([&](const std::string& name, const Tensor& p) {
    EXPECT_EQ(p.dtype(), DType::BF16) << name;
    EXPECT_EQ(autograd::grad(p).dtype(), DType::F32) << name;
  });
  autograd::backward(model.forward(ids(2, 8, 3), ids(2, 8, 4)).loss);
  AdamWConfig cfg;
  cfg.max_grad_norm = 1.0;
  AdamW opt(arena, cfg);
  opt.step(1e-2, 1, 1.0, ops::grad_norm(arena.grads()).norm);
  // working == round_to_bf16(master), element for element (an independent rounding: from_doubles).
  const std::vector<double> master = arena.master().to_doubles();
  const Tensor rounded = Tensor::from_doubles(master, {arena.numel()}, DType::BF16);
  EXPECT_EQ(test::max_abs_diff(arena.working(), rounded), 0.0);
}

// layernorm_fp32: the LayerNorms' leaves are their fp32 master views, every other leaf the bf16
// working copy; the model trains through them (the LayerNorm ops take fp32 parameters under bf16
// activations) and AdamW's update reaches the LayerNorm leaves with no rounding to bf16.
TEST(ParamArena, Fp32LayerNormLeavesAreTheirMastersUnderBf16) {
  nn::GPTConfig c = small_model();
  c.layernorm_fp32 = true;
  nn::GPT model(c, 11);
  ParamArena arena(model, Device::cpu(), DType::BF16);
  std::vector<std::string> ln;
  size_t i = 0;
  model.for_each_parameter([&](const std::string& name, const Tensor& p) {
    const ParamArena::Entry& e = arena.entries()[i++];
    const bool is_ln = name.find("ln_") != std::string::npos;
    EXPECT_EQ(p.dtype(), is_ln ? DType::F32 : DType::BF16) << name;
    if (is_ln) {
      ln.push_back(name);
      EXPECT_EQ(ptr_of(p), ptr_of(arena.master()) + e.offset * 4) << name;
    }
  });
  EXPECT_EQ(ln, model.fp32_parameter_names());
  EXPECT_EQ(ln.size(), size_t{2 * 2 * 2 + 2});  // ln_1, ln_2 of two blocks and ln_f: weight and bias
  autograd::backward(model.forward(ids(2, 8, 3), ids(2, 8, 4)).loss);
  AdamWConfig cfg;
  AdamW opt(arena, cfg);
  opt.step(1e-3, 1, 1.0, ops::grad_norm(arena.grads()).norm);
  // The gains moved off 1 by about lr: values bf16 cannot hold (its spacing above 1 is 2^-7).
  int64_t off_bf16 = 0;
  model.for_each_parameter([&](const std::string& name, const Tensor& p) {
    if (name.find("ln_") == std::string::npos || name.find("weight") == std::string::npos) return;
    const std::vector<double> v = p.to_doubles();
    const std::vector<double> r = ops::cast(ops::cast(p, DType::BF16), DType::F32).to_doubles();
    for (size_t k = 0; k < v.size(); ++k) off_bf16 += v[k] != r[k];
  });
  EXPECT_GT(off_bf16, 0);
}

TEST(ParamArena, LoadMasterChecksNamesAndShapes) {
  nn::GPT model(small_model(), 10);
  ParamArena arena(model, Device::cpu(), DType::BF16);
  std::vector<NamedTensor> w = arena.master_tensors();
  for (auto& t : w) t.tensor = Tensor::full(t.tensor.shape(), 0.25, DType::F32);
  arena.load_master(w);
  model.for_each_parameter([&](const std::string& n, const Tensor& p) {
    for (double v : p.to_doubles()) ASSERT_EQ(v, 0.25) << n;
  });
  w.pop_back();
  EXPECT_THROW(arena.load_master(w), Error);
  w = arena.master_tensors();
  w[0].tensor = Tensor::zeros({3}, DType::F32);
  try {
    arena.load_master(w);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wte.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ft
