// The GPT model end to end: loss at init, float64 gradient check of parameters through the whole
// model (with and without dropout), flash and naive attention giving the same model, the dropout
// generator's consumption, the initialisation scheme, and (with a GPU) CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>

#include "autograd/functions/cross_entropy.h"
#include "autograd/functions/dropout.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linear_cross_entropy_mean.h"
#include "autograd/functions/matmul.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "nn/gpt.h"
#include "ops/attention.h"
#include "ops/dropout.h"
#include "tests/test_util.h"

namespace ft::nn {
namespace {

GPTConfig small_config(int64_t V = 64, int64_t C = 32, int64_t H = 4) {
  GPTConfig c;
  c.vocab_size = V;
  c.max_seq_len = 16;
  c.n_layers = 2;
  c.n_heads = H;
  c.d_model = C;
  c.d_ff = 4 * C;
  c.dropout = 0.0;
  return c;
}

Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(V - 1));
  std::vector<int32_t> ids(static_cast<size_t>(B * T));
  for (auto& x : ids) x = dist(rng);
  return Tensor::from_vector(ids, {B, T});
}

TEST(Gpt, ForwardShapesAndLossAtInitIsLogV) {
  const GPTConfig c = small_config();
  const GPT model(c);
  const Tensor idx = random_ids(4, 16, c.vocab_size, 1), targets = random_ids(4, 16, c.vocab_size, 2);
  const GPTOutput out = model.forward(idx, targets);
  EXPECT_EQ(out.logits.shape(), Shape({4, 16, 64}));
  EXPECT_EQ(out.loss.numel(), 1);
  // Logits of std ~ 0.02 * sqrt(C) ~ 0.1: the loss is ln V plus about var / 2.
  EXPECT_NEAR(out.loss.item(), std::log(64.0), 0.03);
  EXPECT_FALSE(model.forward(idx).loss.defined());
}

// The inference-only FP8 attention (here the CPU emulation; head dim 64) gives the model's logits to
// FP8 precision in eval mode, and is refused in training mode and wherever a gradient could be asked.
TEST(Gpt, Fp8AttentionIsInferenceOnly) {
  GPTConfig c = small_config(64, 128, 2);  // D = 64
  GPT exact(c);                            // the same seed: the same weights
  c.fp8_attention = true;
  GPT fp8(c);
  exact.eval();
  fp8.eval();
  const Tensor idx = random_ids(2, 16, c.vocab_size, 5);
  autograd::NoGradGuard no_grad;
  const double err = test::rel_error(fp8.forward(idx).logits, exact.forward(idx).logits);
  EXPECT_LT(err, 0.05);
  EXPECT_GT(err, 0.0);  // it does run the FP8 path
  fp8.train();
  EXPECT_THROW(fp8.forward(idx), Error);
}

TEST(Gpt, ForwardRejectsBadInputs) {
  const GPT model(small_config());
  EXPECT_THROW(model.forward(random_ids(1, 17, 64, 3)), Error);  // T > max_seq_len
  EXPECT_THROW(model.forward(Tensor::zeros({1, 4}, DType::I64)), Error);
  EXPECT_THROW(model.forward(random_ids(1, 4, 64, 3), random_ids(1, 5, 64, 4)), Error);
}

// Finite differences through the whole model on a few parameters (the tied embedding included, so
// both its uses are checked). With dropout the generator is reset before each forward: the masks
// are a function of its state, so every evaluation sees the same ones.
void gradcheck_model(bool flash, double dropout, int64_t n_kv_heads = 0) {
  GPTConfig c = small_config(13, 8, 2);
  c.n_kv_heads = n_kv_heads;
  c.max_seq_len = 6;
  c.d_ff = 12;
  c.dropout = dropout;
  c.use_flash_attention = flash;
  c.initializer_range = 0.3;  // larger than GPT-2's, so every path carries a sizeable gradient
  GPT model(c, 5);
  model.to(DType::F64);
  model.train();
  const Tensor idx = random_ids(2, 5, 13, 6), targets = random_ids(2, 5, 13, 7);
  const std::vector<std::string> names = {"wte.weight", "wpe.weight", "h.0.attn.c_attn.weight",
                                          "h.1.attn.c_proj.bias", "h.0.mlp.c_proj.weight", "ln_f.weight"};
  std::map<std::string, Tensor*> slots;
  model.for_each_parameter([&](const std::string& name, Tensor& p) { slots[name] = &p; });
  std::vector<Tensor> inputs;
  for (const auto& n : names) inputs.push_back(*slots.at(n));
  const auto fn = [&](const std::vector<Tensor>& in) {
    for (size_t i = 0; i < names.size(); ++i) *slots.at(names[i]) = in[i];
    model.generator().set_state({42, 0});
    return model.forward(idx, targets).loss;
  };
  const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << "flash " << flash << " dropout " << dropout << " n_kv_heads " << n_kv_heads << ": "
                    << r.message << " (inputs: wte, wpe, "
                    << "c_attn.weight, c_proj.bias, mlp.c_proj.weight, ln_f.weight)";
}

TEST(Gpt, Float64GradcheckWithoutDropout) {
  gradcheck_model(true, 0.0);
  gradcheck_model(false, 0.0);
}

TEST(Gpt, Float64GradcheckWithDropout) { gradcheck_model(true, 0.2); }

// Multi-query attention (2 query heads sharing 1 K/V head) through the whole model.
TEST(Gpt, Float64GradcheckMultiQueryAttention) {
  gradcheck_model(true, 0.0, 1);
  gradcheck_model(false, 0.2, 1);
}

TEST(Gpt, GroupedQueryAttentionShapesTheQkvProjection) {
  GPTConfig c = small_config(64, 32, 4);  // D = 8
  c.n_kv_heads = 2;
  const GPT model(c);
  EXPECT_EQ(model.h[0]->attn.c_attn.weight.shape(), Shape({(4 + 2 * 2) * 8, 32}));
  EXPECT_EQ(model.h[0]->attn.c_proj.weight.shape(), Shape({32, 32}));
  const Tensor idx = random_ids(2, 16, c.vocab_size, 1), targets = random_ids(2, 16, c.vocab_size, 2);
  const GPTOutput out = model.forward(idx, targets);
  EXPECT_EQ(out.logits.shape(), Shape({2, 16, 64}));
  EXPECT_NEAR(out.loss.item(), std::log(64.0), 0.06);  // 32 tokens, half ForwardShapes...: a wider bound

  // n_kv_heads = n_heads is today's model: the same parameters, the same loss to the bit.
  GPTConfig mha = small_config(64, 32, 4);
  GPTConfig explicit_mha = mha;
  explicit_mha.n_kv_heads = 4;
  EXPECT_EQ(GPT(explicit_mha, 3).forward(idx, targets).loss.item(), GPT(mha, 3).forward(idx, targets).loss.item());

  c.n_kv_heads = 3;  // does not divide 4
  const std::string e = test::error_of([&] { GPT bad(c); });
  EXPECT_NE(e.find("[gpt] n_heads = 4 must be a multiple of n_kv_heads = 3"), std::string::npos) << e;
}

struct LossAndGrads {
  double loss;
  std::vector<std::pair<std::string, Tensor>> grads;
};

LossAndGrads run(GPTConfig c, bool flash, DType dtype, double dropout) {
  c.use_flash_attention = flash;
  c.dropout = dropout;
  GPT model(c, 9);
  model.to(dtype);
  model.generator().set_state({77, 0});
  const Tensor idx = random_ids(2, 16, c.vocab_size, 10), targets = random_ids(2, 16, c.vocab_size, 11);
  const GPTOutput out = model.forward(idx, targets);
  autograd::backward(out.loss);
  LossAndGrads r{out.loss.item(), {}};
  model.for_each_parameter([&](const std::string& n, Tensor& p) { r.grads.emplace_back(n, autograd::grad(p)); });
  return r;
}

TEST(Gpt, FlashAndNaiveGiveTheSameModelOnCpu) {
  // f32 and f64 run the float64 attention reference for both: equal to the bit.
  for (const double p : {0.0, 0.1}) {
    const LossAndGrads f = run(small_config(), true, DType::F32, p), n = run(small_config(), false, DType::F32, p);
    EXPECT_EQ(f.loss, n.loss);
    for (size_t i = 0; i < f.grads.size(); ++i)
      EXPECT_EQ(test::max_abs_diff(f.grads[i].second, n.grads[i].second), 0.0) << f.grads[i].first;
  }
}

TEST(Gpt, FlashAndNaiveAgreeToBf16RoundingOnCpu) {
  // bf16 runs the tiled flash algorithm and the low-precision naive, with the same dropout masks.
  const LossAndGrads f = run(small_config(), true, DType::BF16, 0.1), n = run(small_config(), false, DType::BF16, 0.1);
  // Measured: loss 7e-6 relative apart, gradients 0.4% to 0.7%; the bounds leave about 3x room.
  EXPECT_NEAR(f.loss, n.loss, 1e-3 * std::fabs(n.loss));
  for (size_t i = 0; i < f.grads.size(); ++i)
    EXPECT_LE(test::rel_error(f.grads[i].second, n.grads[i].second), 2e-2) << f.grads[i].first;
}

// The model as it was before its residual adds were fused with the LayerNorms after them, built
// here from the modules and the unfused autograd ops, drawing dropout states from the model's
// generator in the same order (embedding, then per block: attention, residual, residual). The
// output projections' biases are added by an ops::add of their own, as the fused op defines them
// (ops/residual_layernorm.h: h + h_bias rounded, then the dropout); a matmul epilogue would add
// them before its one rounding.
GPTOutput unfused_forward(GPT& m, const Tensor& idx, const Tensor& targets, double p) {
  const int64_t T = idx.size(1);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
  auto drop = [&](const Tensor& t) {
    return p > 0 ? autograd::dropout(t, static_cast<float>(p), m.generator().next(ops::kDropoutOffsets)) : t;
  };
  Tensor x = drop(autograd::add(m.wte.forward(idx), m.wpe.forward(Tensor::from_vector(pos, {T}).to(idx.device()))));
  for (const auto& b : m.h) {
    const Tensor attn = autograd::add(b->attn.forward_without_proj_bias(b->ln_1.forward(x)), b->attn.c_proj.bias);
    const Tensor a = autograd::add(x, drop(attn));
    x = autograd::add(a, drop(autograd::add(b->mlp.forward_without_proj_bias(b->ln_2.forward(a)), b->mlp.c_proj.bias)));
  }
  x = m.ln_f.forward(x);
  ops::MatmulOptions head;
  head.trans_b = true;
  GPTOutput out;
  out.logits = autograd::matmul(x, m.wte.weight, head);
  out.loss = autograd::cross_entropy_mean(out.logits, targets);
  return out;
}

LossAndGrads run_fused_or_not(const GPTConfig& c, bool fused, DType dtype, Device dev) {
  GPT model(c, 21);
  model.to(dtype);
  model.to(dev);
  model.generator().set_state({33, 0});
  const Tensor idx = random_ids(2, 16, c.vocab_size, 22).to(dev), targets = random_ids(2, 16, c.vocab_size, 23).to(dev);
  const GPTOutput out = fused ? model.forward(idx, targets) : unfused_forward(model, idx, targets, c.dropout);
  autograd::backward(out.loss);
  LossAndGrads r{out.loss.item(), {}};
  model.for_each_parameter(
      [&](const std::string& n, Tensor& p) { r.grads.emplace_back(n, autograd::grad(p).to(Device::cpu())); });
  return r;
}

// The fused model is the unfused one: same loss and gradients, with and without dropout (the
// same masks), three layers so that a block hands its fused ln_1 to the next. f32 on the CPU
// computes LayerNorm in double either way; 1e-5 leaves room for the different order of the
// engine's sums. bf16 on the CPU rounds as the unfused ops do, step for step: equal to the bit.
TEST(Gpt, FusedResidualLayerNormsGiveTheUnfusedModelOnCpu) {
  GPTConfig c = small_config();
  c.n_layers = 3;
  for (const double p : {0.0, 0.1}) {
    c.dropout = p;
    const LossAndGrads f = run_fused_or_not(c, true, DType::F32, Device::cpu());
    const LossAndGrads u = run_fused_or_not(c, false, DType::F32, Device::cpu());
    EXPECT_NEAR(f.loss, u.loss, 1e-5 * std::fabs(u.loss)) << "p=" << p;
    ASSERT_EQ(f.grads.size(), u.grads.size());
    for (size_t i = 0; i < f.grads.size(); ++i)
      EXPECT_LE(test::rel_error(f.grads[i].second, u.grads[i].second), 1e-5) << f.grads[i].first << " p=" << p;
    const LossAndGrads fb = run_fused_or_not(c, true, DType::BF16, Device::cpu());
    const LossAndGrads ub = run_fused_or_not(c, false, DType::BF16, Device::cpu());
    EXPECT_EQ(fb.loss, ub.loss) << "p=" << p;
    for (size_t i = 0; i < fb.grads.size(); ++i)
      EXPECT_EQ(test::max_abs_diff(fb.grads[i].second, ub.grads[i].second), 0.0) << fb.grads[i].first << " p=" << p;
  }
}

// The training step's one-pass head (forward with a grad_scale_hint: the forward writes dlogits,
// autograd::linear_cross_entropy_mean) against the two-pass head (no hint), both seeded with
// `seed` (the trainer passes its seed as the hint; fp16's loss scale is 1024 here).
LossAndGrads run_head(const GPTConfig& c, bool one_pass, double seed, DType dtype, Device dev) {
  GPT model(c, 31);
  model.to(dtype);
  model.to(dev);
  const Tensor idx = random_ids(2, 16, c.vocab_size, 32).to(dev), targets = random_ids(2, 16, c.vocab_size, 33).to(dev);
  const Tensor s = Tensor::full({}, seed, DType::F32, dev);
  const GPTOutput out = model.forward(idx, targets, 2 * 16, one_pass ? s : Tensor());
  autograd::backward(out.loss, s);
  LossAndGrads r{out.loss.item(), {}};
  model.for_each_parameter(
      [&](const std::string& n, Tensor& p) { r.grads.emplace_back(n, autograd::grad(p).to(Device::cpu())); });
  return r;
}

// On the CPU the one-pass head runs the same reference kernels with the same factors (the
// products' alpha is seed / seed = 1): equal to the bit, in f32 and bf16.
TEST(Gpt, OnePassHeadGivesTheTwoPassHeadOnCpu) {
  for (DType dt : {DType::F32, DType::BF16}) {
    for (double seed : {1.0, 1024.0}) {
      const LossAndGrads a = run_head(small_config(), true, seed, dt, Device::cpu());
      const LossAndGrads b = run_head(small_config(), false, seed, dt, Device::cpu());
      EXPECT_EQ(a.loss, b.loss) << dt << " seed " << seed;
      ASSERT_EQ(a.grads.size(), b.grads.size());
      for (size_t i = 0; i < a.grads.size(); ++i)
        EXPECT_EQ(test::max_abs_diff(a.grads[i].second, b.grads[i].second), 0.0)
            << a.grads[i].first << " " << dt << " seed " << seed;
    }
  }
}

// document_mask: positions before a row's first eot (and rows without one, or with one only at 0)
// keep the logits of plain causal attention bit for bit; positions from a later eot on change. So
// the loss of rows without boundaries is unchanged, and a row with boundaries changes it.
TEST(Gpt, DocumentMaskChangesOnlyPositionsInLaterDocuments) {
  GPTConfig c = small_config();
  const int32_t e = 63;
  c.eot_token = e;
  const int64_t B = 3, T = 16;
  std::vector<int32_t> ids = random_ids(B, T, 60, 21).to_vector<int32_t>();  // ids < 60: no eot
  ids[1 * T + 5] = ids[1 * T + 11] = e;  // row 1: documents from 5 and 11
  ids[2 * T + 0] = e;                    // row 2: one document from 0
  const Tensor idx = Tensor::from_vector(ids, {B, T});
  GPTConfig masked_cfg = c;
  masked_cfg.document_mask = true;
  const GPT plain(c, 3), masked(masked_cfg, 3);
  const std::vector<float> a = plain.forward(idx).logits.to_floats(), b = masked.forward(idx).logits.to_floats();
  const int64_t V = c.vocab_size;
  for (int64_t r = 0; r < B; ++r)
    for (int64_t t = 0; t < T; ++t) {
      const std::vector<float> pa(a.begin() + (r * T + t) * V, a.begin() + (r * T + t + 1) * V);
      const std::vector<float> pb(b.begin() + (r * T + t) * V, b.begin() + (r * T + t + 1) * V);
      if (r == 1 && t >= 5) {
        EXPECT_NE(pa, pb) << "row " << r << " position " << t;
      } else {
        EXPECT_EQ(pa, pb) << "row " << r << " position " << t;
      }
    }
  // The loss over rows 0 and 2 only (row 1's targets -1) is unchanged; over all rows it changes.
  std::vector<int32_t> tg = random_ids(B, T, V, 22).to_vector<int32_t>();
  const Tensor all_targets = Tensor::from_vector(tg, {B, T});
  for (int64_t t = 0; t < T; ++t) tg[1 * T + t] = -1;
  const Tensor no_row1 = Tensor::from_vector(tg, {B, T});
  EXPECT_EQ(plain.forward(idx, no_row1).loss.item(), masked.forward(idx, no_row1).loss.item());
  EXPECT_NE(plain.forward(idx, all_targets).loss.item(), masked.forward(idx, all_targets).loss.item());
  // document_mask false is the default and the model of before: no doc_start reaches attention.
  EXPECT_FALSE(GPTConfig().document_mask);
}

// The masked model trains through the tape: float64 gradients of a row with three documents.
TEST(Gpt, DocumentMaskGradcheck) {
  GPTConfig c = small_config(16, 8, 2);
  c.n_layers = 1;
  c.eot_token = 15;
  c.document_mask = true;
  c.initializer_range = 0.3;  // sizeable gradients, as in gradcheck_model
  GPT model(c, 4);
  model.to(DType::F64);
  const Tensor idx = Tensor::from_vector(std::vector<int32_t>{1, 2, 15, 3, 4, 15, 5}, {1, 7});
  const Tensor targets = Tensor::from_vector(std::vector<int32_t>{2, 15, 3, 4, 15, 5, 6}, {1, 7});
  Tensor* w = nullptr;
  model.for_each_parameter([&](const std::string& name, Tensor& p) {
    if (name == "h.0.attn.c_attn.weight") w = &p;
  });
  ASSERT_NE(w, nullptr);
  const auto fn = [&](const std::vector<Tensor>& in) {
    *w = in[0];
    return model.forward(idx, targets).loss;
  };
  const autograd::GradcheckResult r = autograd::gradcheck(fn, {*w});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Gpt, DropoutDrawsFromTheGeneratorOnlyInTraining) {
  GPTConfig c = small_config();
  c.dropout = 0.1;
  GPT model(c);
  const Tensor idx = random_ids(2, 16, c.vocab_size, 12);
  model.generator().set_state({1, 0});
  (void)model.forward(idx);
  // Embedding dropout, then per block: attention (one offset per batch-head) and two residuals.
  EXPECT_EQ(model.generator().state().offset, 1 + 2 * (ops::attention_philox_offsets(2, 4) + 2));
  model.eval();
  const uint64_t before = model.generator().state().offset;
  const Tensor a = model.forward(idx).logits, b = model.forward(idx).logits;
  EXPECT_EQ(model.generator().state().offset, before);
  EXPECT_EQ(test::max_abs_diff(a, b), 0.0);
}

TEST(Gpt, InitialisationFollowsGpt2) {
  GPTConfig c = small_config(64, 64, 4);
  c.n_layers = 4;
  const GPT model(c, 3);
  auto stddev = [](const Tensor& t) {
    double s = 0;
    const auto v = t.to_doubles();
    for (double x : v) s += x * x;
    return std::sqrt(s / v.size());
  };
  EXPECT_NEAR(stddev(model.wte.weight), 0.02, 0.002);
  EXPECT_NEAR(stddev(model.h[0]->attn.c_attn.weight), 0.02, 0.002);
  EXPECT_NEAR(stddev(model.h[2]->mlp.c_fc.weight), 0.02, 0.002);
  const double residual = 0.02 / std::sqrt(2.0 * 4);
  EXPECT_NEAR(stddev(model.h[1]->attn.c_proj.weight), residual, 0.1 * residual);
  EXPECT_NEAR(stddev(model.h[3]->mlp.c_proj.weight), residual, 0.1 * residual);
  EXPECT_EQ(stddev(model.h[0]->attn.c_attn.bias), 0.0);
  for (double x : model.ln_f.weight.to_doubles()) EXPECT_EQ(x, 1.0);
  // The same seed gives the same weights; another seed others.
  EXPECT_EQ(test::max_abs_diff(GPT(c, 3).wpe.weight, model.wpe.weight), 0.0);
  EXPECT_GT(test::max_abs_diff(GPT(c, 4).wpe.weight, model.wpe.weight), 0.0);
}

// D = 64 so the CUDA flash kernel takes it; bf16 on both sides (the CPU emulates the kernels'
// rounding), so the two agree to bf16 noise.
void expect_cuda_matches_cpu_in_bf16(int64_t n_heads, int64_t n_kv_heads) {
  for (const bool flash : {true, false}) {
    GPTConfig c = small_config(64, 64 * n_heads, n_heads);
    c.n_kv_heads = n_kv_heads;
    c.use_flash_attention = flash;
    c.dropout = 0.1;
    const Tensor idx = random_ids(2, 16, c.vocab_size, 13), targets = random_ids(2, 16, c.vocab_size, 14);
    double loss[2];
    Tensor g[2];
    for (int on_gpu = 0; on_gpu < 2; ++on_gpu) {
      GPT model(c, 15);
      model.to(DType::BF16);
      const Device dev = on_gpu ? Device::cuda(0) : Device::cpu();
      model.to(dev);
      model.generator().set_state({5, 0});
      const GPTOutput out = model.forward(idx.to(dev), targets.to(dev));
      autograd::backward(out.loss);
      loss[on_gpu] = out.loss.item();
      g[on_gpu] = autograd::grad(model.h[0]->attn.c_attn.weight).to(Device::cpu());
    }
    EXPECT_NEAR(loss[1], loss[0], 1e-2 * loss[0]) << "flash " << flash << " n_kv_heads " << n_kv_heads;
    EXPECT_LE(test::rel_error(g[1], g[0]), 5e-2) << "flash " << flash << " n_kv_heads " << n_kv_heads;
  }
}

TEST(GptCuda, MatchesTheCpuInBf16) {
  FT_REQUIRE_CUDA();
  expect_cuda_matches_cpu_in_bf16(2, 0);
}

// Grouped-query (4 query heads on 2 K/V heads) and multi-query attention.
TEST(GptCuda, GroupedQueryMatchesTheCpuInBf16) {
  FT_REQUIRE_CUDA();
  expect_cuda_matches_cpu_in_bf16(4, 2);
  expect_cuda_matches_cpu_in_bf16(4, 1);
}

// On the GPU at bf16 the fused kernels give the unfused ops' activations and activation
// gradients bit for bit (tests/ops/residual_layernorm_test.cpp), so the loss is equal; the
// LayerNorm weight and bias gradients and the output projections' bias gradients (summed over dh
// by the fused backward) are fp32 sums in another order, rounded to bf16, so they may differ by
// an ulp (2^-8 relative), and nothing downstream of them in the backward reads them.
TEST(GptCuda, FusedResidualLayerNormsGiveTheUnfusedModelInBf16) {
  FT_REQUIRE_CUDA();
  GPTConfig c = small_config(64, 128, 2);
  c.n_layers = 3;
  for (const double p : {0.0, 0.1}) {
    c.dropout = p;
    const LossAndGrads f = run_fused_or_not(c, true, DType::BF16, Device::cuda(0));
    const LossAndGrads u = run_fused_or_not(c, false, DType::BF16, Device::cuda(0));
    EXPECT_EQ(f.loss, u.loss) << "p=" << p;
    for (size_t i = 0; i < f.grads.size(); ++i) {
      const std::string& n = f.grads[i].first;
      const bool ln = n.find("ln_") != std::string::npos || n.find("c_proj.bias") != std::string::npos;
      if (ln) EXPECT_LE(test::rel_error(f.grads[i].second, u.grads[i].second), 1e-2) << f.grads[i].first;
      else EXPECT_EQ(test::max_abs_diff(f.grads[i].second, u.grads[i].second), 0.0) << f.grads[i].first << " p=" << p;
    }
  }
}

// On CUDA the one-pass kernel sums each row's exponentials in another order than the forward
// kernel (fp32 rounding of lse), so dlogits may round to a neighbouring half value here and there:
// the loss agrees to fp32 rounding, the gradients to half rounding. bf16 with seed 1, fp16 with
// the loss scale 1024 as seed and hint.
// Also in chunks of rows (a 16 KiB budget: 4 chunks of the 32 rows' 63 KiB of logits), as
// GPT-2-small's training step runs it.
TEST(GptCuda, OnePassHeadGivesTheTwoPassHead) {
  FT_REQUIRE_CUDA();
  GPTConfig c = small_config(1001, 64, 1);  // odd V: padded logits rows
  c.use_flash_attention = false;            // the head is what differs; attention takes any dtype
  for (int64_t chunk_bytes : {int64_t{-1}, int64_t{16384}})
  for (const auto& [dt, seed] : {std::pair{DType::BF16, 1.0}, std::pair{DType::F16, 1024.0}}) {
    SCOPED_TRACE(chunk_bytes < 0 ? "one pass" : "in chunks");
    autograd::set_head_chunk_bytes(chunk_bytes);
    const LossAndGrads a = run_head(c, true, seed, dt, Device::cuda());
    autograd::set_head_chunk_bytes(-1);
    const LossAndGrads b = run_head(c, false, seed, dt, Device::cuda());
    EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::fabs(b.loss)) << dt;
    ASSERT_EQ(a.grads.size(), b.grads.size());
    for (size_t i = 0; i < a.grads.size(); ++i)
      EXPECT_LE(test::rel_error(a.grads[i].second, b.grads[i].second), 1e-2) << a.grads[i].first << " " << dt;
  }
}

}  // namespace
}  // namespace ft::nn
