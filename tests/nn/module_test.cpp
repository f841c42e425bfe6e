// Module plumbing: recursive names in the Hugging Face GPT-2 layout, parameter counts, replacing
// parameters through for_each_parameter (the trainer's flat arena), dtype moves, train/eval.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "tests/test_util.h"

namespace ft::nn {
namespace {

GPTConfig tiny_config() {
  GPTConfig c;
  c.vocab_size = 11;
  c.max_seq_len = 8;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 8;
  c.d_ff = 12;
  c.dropout = 0.0;
  return c;
}

// Counted by hand from the architecture, independently of the module registry.
int64_t expected_parameters(const GPTConfig& c) {
  const int64_t V = c.vocab_size, Tmax = c.max_seq_len, C = c.d_model, F = c.d_ff, L = c.n_layers;
  const int64_t block = 2 * C                // ln_1
                        + 3 * C * C + 3 * C  // attn.c_attn
                        + C * C + C          // attn.c_proj
                        + 2 * C              // ln_2
                        + F * C + F          // mlp.c_fc
                        + C * F + C;         // mlp.c_proj
  return V * C + Tmax * C + L * block + 2 * C;  // wte (tied head), wpe, blocks, ln_f
}

TEST(Module, GptNamesFollowTheHuggingFaceLayout) {
  const GPT model(tiny_config());
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const auto& [name, t] : model.named_parameters()) {
    names.push_back(name);
    shapes.push_back(t.shape());
  }
  std::vector<std::string> expected = {"wte.weight", "wpe.weight"};
  for (int i = 0; i < 2; ++i)
    for (const char* s : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
                          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                          "mlp.c_proj.weight", "mlp.c_proj.bias"})
      expected.push_back("h." + std::to_string(i) + "." + s);
  expected.push_back("ln_f.weight");
  expected.push_back("ln_f.bias");
  EXPECT_EQ(names, expected);
  // Linear weights are (out, in), as PyTorch's nn.Linear.
  EXPECT_EQ(shapes[0], Shape({11, 8}));
  EXPECT_EQ(shapes[1], Shape({8, 8}));
  EXPECT_EQ(shapes[4], Shape({24, 8}));   // h.0.attn.c_attn.weight (3C, C)
  EXPECT_EQ(shapes[10], Shape({12, 8}));  // h.0.mlp.c_fc.weight (F, C)
  EXPECT_EQ(shapes[12], Shape({8, 12}));  // h.0.mlp.c_proj.weight (C, F)
}

TEST(Module, ParameterCountMatchesTheArchitecture) {
  for (int64_t layers : {1, 2, 3}) {
    GPTConfig c = tiny_config();
    c.n_layers = layers;
    EXPECT_EQ(GPT(c).num_parameters(), expected_parameters(c));
  }
  GPTConfig small;  // GPT-2 small: tied embeddings, max_seq_len 1024
  EXPECT_EQ(expected_parameters(small), 124439808);
  small.max_seq_len = 512;  // configs/gpt2-small.yaml: 1024 - 512 position rows of 768 fewer
  EXPECT_EQ(expected_parameters(small), 124046592);
}

TEST(Module, Gpt2SmallBuildsWithTheHuggingFaceParameterCount) {
  GPTConfig small;  // defaults are GPT-2 small
  const GPT model(small);
  EXPECT_EQ(model.num_parameters(), 124439808);
  EXPECT_EQ(model.named_parameters().size(), 2u + 12u * 12u + 2u);  // 148, as HF minus lm_head
}

TEST(Module, ParametersCanBeReplacedByViewsIntoOneArena) {
  GPT model(tiny_config());
  const int64_t n = model.num_parameters();
  Tensor arena = Tensor::zeros({n}, DType::F32);  // (N) all parameters
  Tensor grads = Tensor::zeros({n}, DType::F32);  // (N) all gradients
  int64_t at = 0;
  model.for_each_parameter([&](const std::string&, Tensor& p) {
    Tensor slot = arena.slice(0, at, at + p.numel()).view(p.shape());
    slot.copy_(p);
    p = slot;
    autograd::set_requires_grad(p);
    autograd::set_grad(p, grads.slice(0, at, at + p.numel()).view(p.shape()));
    at += p.numel();
  });
  EXPECT_EQ(at, n);
  model.for_each_parameter([&](const std::string& name, Tensor& p) {
    EXPECT_TRUE(p.storage() == arena.storage()) << name;
  });
  const Tensor idx = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  const GPTOutput out = model.forward(idx, idx);
  autograd::backward(out.loss);

  GPT fresh(tiny_config());  // same seed: same weights, gradients in the usual per-tensor way
  autograd::backward(fresh.forward(idx, idx).loss);
  std::vector<float> expected;
  fresh.for_each_parameter([&](const std::string&, Tensor& p) {
    const auto g = autograd::grad(p).to_floats();
    expected.insert(expected.end(), g.begin(), g.end());
  });
  // Preset gradients take the matrix products' and biases' sums in place (autograd::direct_grad),
  // which rounds differently from a separate product and add: equal to fp32 rounding.
  const std::vector<float> got = grads.to_floats();
  ASSERT_EQ(got.size(), expected.size());
  std::vector<double> a(got.begin(), got.end()), b(expected.begin(), expected.end());
  EXPECT_LT(test::rel_error(a, b), 1e-6);
}

TEST(Module, ToDtypeKeepsRequiresGradAndTrainEvalRecurses) {
  GPT model(tiny_config());
  model.to(DType::F64);
  model.for_each_parameter([&](const std::string& name, Tensor& p) {
    EXPECT_EQ(p.dtype(), DType::F64) << name;
    EXPECT_TRUE(autograd::requires_grad(p)) << name;
  });
  EXPECT_TRUE(model.h[1]->mlp.is_training());
  model.eval();
  EXPECT_FALSE(model.h[1]->mlp.c_fc.is_training());
  model.train();
  EXPECT_TRUE(model.h[0]->attn.is_training());
}

// layernorm_fp32: to(bf16) / to(f16) leaves the LayerNorms' weight and bias in f32 (and says which
// they are), the rest in the half dtype; to(f64) still casts everything (the gradient checks); and
// without the flag every parameter follows the cast.
TEST(Module, Fp32LayerNormParametersStayFp32UnderHalfCasts) {
  GPTConfig c = tiny_config();
  c.layernorm_fp32 = true;
  for (DType half : {DType::BF16, DType::F16}) {
    GPT model(c);
    model.to(half);
    std::vector<std::string> f32;
    model.for_each_parameter([&](const std::string& name, Tensor& p) {
      if (p.dtype() == DType::F32) f32.push_back(name);
      else EXPECT_EQ(p.dtype(), half) << name;
      EXPECT_TRUE(autograd::requires_grad(p)) << name;
    });
    EXPECT_EQ(f32, model.fp32_parameter_names());
    EXPECT_EQ(f32.front(), "h.0.ln_1.weight");
    EXPECT_EQ(f32.back(), "ln_f.bias");
    model.to(DType::F64);
    model.for_each_parameter([&](const std::string& name, Tensor& p) { EXPECT_EQ(p.dtype(), DType::F64) << name; });
  }
  GPTConfig without = tiny_config();
  without.layernorm_fp32 = false;
  GPT plain(without);
  plain.to(DType::BF16);
  EXPECT_TRUE(plain.fp32_parameter_names().empty());
  plain.for_each_parameter([&](const std::string& name, Tensor& p) { EXPECT_EQ(p.dtype(), DType::BF16) << name; });
}

TEST(Module, LinearIsXTimesWeightTransposedPlusBias) {
  Linear lin(3, 2);
  lin.weight.copy_(Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  lin.bias.copy_(Tensor::from_vector<float>({10, 20}, {2}));
  const Tensor y = lin.forward(Tensor::from_vector<float>({1, 0, -1}, {1, 3}));
  EXPECT_EQ(y.to_floats(), (std::vector<float>{1 - 3 + 10, 4 - 6 + 20}));
}

TEST(Module, ConfigErrorsNameTheField) {
  GPTConfig c = tiny_config();
  c.n_heads = 3;
  try {
    GPT model(c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("n_heads = 3 must divide d_model = 8"), std::string::npos) << e.what();
  }
  c = tiny_config();
  c.activation = MlpActivation::Relu;  // available since ops/relu (tests/train trains one)
  EXPECT_NO_THROW(GPT model(c));
}

}  // namespace
}  // namespace ft::nn
