#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "tests/test_util.h"
#include "train/checkpoint/hf_gpt2_names.h"

namespace ft {
namespace {

// V 11, T 8, C 4 (3C 12), L 2, H 2, F 16: every dimension distinct, so a wrong transpose shows.
Gpt2Dims tiny_dims() { return Gpt2Dims{11, 8, 4, 2, 2, 16}; }

Shape shape_for(const std::string& name, const Gpt2Dims& d) {
  auto ends = [&](const char* s) { return name.size() >= std::strlen(s) && name.compare(name.size() - std::strlen(s), std::string::npos, s) == 0; };
  if (name == "wte.weight") return {d.vocab_size, d.n_embd};
  if (name == "wpe.weight") return {d.n_positions, d.n_embd};
  if (ends("attn.c_attn.weight")) return {3 * d.n_embd, d.n_embd};
  if (ends("attn.c_attn.bias")) return {3 * d.n_embd};
  if (ends("attn.c_proj.weight")) return {d.n_embd, d.n_embd};
  if (ends("mlp.c_fc.weight")) return {d.n_inner, d.n_embd};
  if (ends("mlp.c_fc.bias")) return {d.n_inner};
  if (ends("mlp.c_proj.weight")) return {d.n_embd, d.n_inner};
  return {d.n_embd};
}

// Each parameter filled with values unique across the model (value = 1000 * index + element).
std::vector<NamedTensor> make_params(const Gpt2Dims& d) {
  std::vector<NamedTensor> out;
  int k = 0;
  for (const auto& name : gpt2_param_names(d.n_layer)) {
    const Shape s = shape_for(name, d);
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(1000 * k + static_cast<int>(i));
    out.push_back({name, Tensor::from_vector(v, s)});
    ++k;
  }
  return out;
}

using test::error_of;

TEST(HfGpt2Names, NameTable) {
  bool t = true;
  EXPECT_EQ(hf_gpt2_name("wte.weight", &t), "transformer.wte.weight");
  EXPECT_FALSE(t);
  EXPECT_EQ(hf_gpt2_name("wpe.weight"), "transformer.wpe.weight");
  EXPECT_EQ(hf_gpt2_name("ln_f.bias"), "transformer.ln_f.bias");
  EXPECT_EQ(hf_gpt2_name("h.0.ln_1.weight", &t), "transformer.h.0.ln_1.weight");
  EXPECT_FALSE(t);
  EXPECT_EQ(hf_gpt2_name("h.11.attn.c_attn.weight", &t), "transformer.h.11.attn.c_attn.weight");
  EXPECT_TRUE(t);
  EXPECT_EQ(hf_gpt2_name("h.3.attn.c_attn.bias", &t), "transformer.h.3.attn.c_attn.bias");
  EXPECT_FALSE(t);
  EXPECT_EQ(hf_gpt2_name("h.3.attn.c_proj.weight", &t), "transformer.h.3.attn.c_proj.weight");
  EXPECT_TRUE(t);
  EXPECT_EQ(hf_gpt2_name("h.3.mlp.c_fc.weight", &t), "transformer.h.3.mlp.c_fc.weight");
  EXPECT_TRUE(t);
  EXPECT_EQ(hf_gpt2_name("h.3.mlp.c_proj.bias", &t), "transformer.h.3.mlp.c_proj.bias");
  EXPECT_FALSE(t);
  EXPECT_EQ(hf_gpt2_name("h.3.ln_2.bias"), "transformer.h.3.ln_2.bias");
  EXPECT_THROW(hf_gpt2_name("h.x.ln_2.bias"), Error);
  EXPECT_THROW(hf_gpt2_name("lm_head.weight"), Error);
  EXPECT_EQ(gpt2_param_names(12).size(), 2u + 12u * 12u + 2u);  // 148, as in HF's GPT-2 minus lm_head
  const Gpt2Dims d = tiny_dims();
  for (const auto& name : gpt2_param_names(d.n_layer)) EXPECT_EQ(gpt2_param_shape(name, d), shape_for(name, d)) << name;
  EXPECT_THROW(gpt2_param_shape("h.0.attn.qkv", d), Error);
}

TEST(HfGpt2Names, ConvWeightsAreTransposedAndTheRestCopied) {
  const Gpt2Dims d = tiny_dims();
  const auto ours = make_params(d);
  const auto hf = to_hf_gpt2(ours, d);
  ASSERT_EQ(hf.size(), ours.size());
  std::set<std::string> names;
  for (const auto& t : hf) names.insert(t.name);
  EXPECT_EQ(names.count("lm_head.weight"), 0u);  // tied: HF saves only wte
  EXPECT_EQ(names.count("transformer.h.1.mlp.c_proj.weight"), 1u);
  for (size_t k = 0; k < ours.size(); ++k) {
    bool transposed = false;
    EXPECT_EQ(hf[k].name, hf_gpt2_name(ours[k].name, &transposed));
    const Tensor& a = ours[k].tensor;
    const Tensor& b = hf[k].tensor;
    const auto av = a.to_vector<float>(), bv = b.to_vector<float>();
    if (!transposed) {
      EXPECT_EQ(b.shape(), a.shape()) << ours[k].name;
      EXPECT_EQ(av, bv) << ours[k].name;
      continue;
    }
    ASSERT_EQ(b.shape(), (Shape{a.size(1), a.size(0)})) << ours[k].name;
    const int64_t rows = a.size(0), cols = a.size(1);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(av[r * cols + c], bv[c * rows + r]) << ours[k].name;
    }
  }
  // HF's shapes, written out: Conv1D weights are (in, out).
  const std::map<std::string, Shape> hf_shapes = {
      {"transformer.wte.weight", {11, 4}},          {"transformer.wpe.weight", {8, 4}},
      {"transformer.h.1.attn.c_attn.weight", {4, 12}}, {"transformer.h.1.attn.c_attn.bias", {12}},
      {"transformer.h.1.attn.c_proj.weight", {4, 4}},  {"transformer.h.1.mlp.c_fc.weight", {4, 16}},
      {"transformer.h.1.mlp.c_fc.bias", {16}},        {"transformer.h.1.mlp.c_proj.weight", {16, 4}},
      {"transformer.h.1.mlp.c_proj.bias", {4}},       {"transformer.ln_f.weight", {4}}};
  for (const auto& t : hf) {
    const auto it = hf_shapes.find(t.name);
    if (it != hf_shapes.end()) {
      EXPECT_EQ(t.tensor.shape(), it->second) << t.name;
    }
  }
  // c_attn columns are [q | k | v]: column C of HF's c_attn is row C (the first k row) of ours.
  const Tensor& qkv = ours[4].tensor;  // h.0.attn.c_attn.weight (3C, C)
  const Tensor& c_attn = hf[4].tensor;  // (C, 3C)
  ASSERT_EQ(ours[4].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(c_attn.to_vector<float>()[0 * 12 + 4], qkv.to_vector<float>()[4 * 4 + 0]);
}

TEST(HfGpt2Names, RoundTripIsExact) {
  const Gpt2Dims d = tiny_dims();
  const auto ours = make_params(d);
  const auto back = from_hf_gpt2(to_hf_gpt2(ours, d), d);
  ASSERT_EQ(back.size(), ours.size());
  for (size_t k = 0; k < ours.size(); ++k) {
    EXPECT_EQ(back[k].name, ours[k].name);
    EXPECT_EQ(back[k].tensor.shape(), ours[k].tensor.shape());
    EXPECT_EQ(back[k].tensor.to_vector<float>(), ours[k].tensor.to_vector<float>());
  }
}

TEST(HfGpt2Names, ReaderAcceptsHubLayouts) {
  const Gpt2Dims d = tiny_dims();
  auto hf = to_hf_gpt2(make_params(d), d);
  // The hub's gpt2 files: bare names (saved from GPT2Model), mask buffers, a tied lm_head.
  for (auto& t : hf) t.name = t.name.substr(std::strlen("transformer."));
  hf.push_back({"h.0.attn.bias", Tensor::zeros({1, 1, 8, 8}, DType::F32)});
  hf.push_back({"h.1.attn.masked_bias", Tensor::zeros({}, DType::F32)});
  hf.push_back({"lm_head.weight", hf[0].tensor.clone()});
  const auto back = from_hf_gpt2(hf, d);
  EXPECT_EQ(back[0].name, "wte.weight");
  hf.back().tensor = Tensor::full({11, 4}, 0.5, DType::F32);  // an untied head
  EXPECT_NE(error_of([&] { from_hf_gpt2(hf, d); }).find("lm_head.weight differs from transformer.wte.weight"), std::string::npos);
}

TEST(HfGpt2Names, ErrorsNameTheTensor) {
  const Gpt2Dims d = tiny_dims();
  auto ours = make_params(d);
  auto missing = ours;
  missing.erase(missing.begin() + 5);
  EXPECT_EQ(error_of([&] { to_hf_gpt2(missing, d); }), "[hf_gpt2] parameter 'h.0.attn.c_attn.bias' is missing");
  auto wrong = ours;
  wrong[4].tensor = Tensor::zeros({4, 12}, DType::F32);  // given in HF orientation by mistake
  EXPECT_EQ(error_of([&] { to_hf_gpt2(wrong, d); }),
            "[hf_gpt2] parameter 'h.0.attn.c_attn.weight' has shape (4, 12), expected (12, 4)");
  auto extra = ours;
  extra.push_back({"h.2.ln_1.weight", Tensor::zeros({4}, DType::F32)});
  EXPECT_EQ(error_of([&] { to_hf_gpt2(extra, d); }), "[hf_gpt2] parameter 'h.2.ln_1.weight' belongs to no block of a 2-layer model");
  auto hf = to_hf_gpt2(ours, d);
  hf.push_back({"transformer.h.0.attn.rotary", Tensor::zeros({1}, DType::F32)});
  EXPECT_EQ(error_of([&] { from_hf_gpt2(hf, d); }), "[hf_gpt2] unexpected tensor 'transformer.h.0.attn.rotary' for a 2-layer GPT-2");
  Gpt2Dims bigger = d;
  bigger.vocab_size = 12;
  EXPECT_EQ(error_of([&] { from_hf_gpt2(to_hf_gpt2(ours, d), bigger); }),
            "[hf_gpt2] tensor 'transformer.wte.weight' has shape (11, 4), expected (12, 4)");
}

TEST(HfGpt2Names, ConfigJsonForGpt2Small) {
  TrainConfig cfg;  // the gpt2-small defaults
  const Json j = hf_gpt2_config_json(cfg);
  EXPECT_EQ(j.at("model_type").as_string(), "gpt2");
  EXPECT_EQ(j.at("architectures").items()[0].as_string(), "GPT2LMHeadModel");
  EXPECT_EQ(j.at("n_embd").as_int64(), 768);
  EXPECT_EQ(j.at("n_layer").as_int64(), 12);
  EXPECT_EQ(j.at("n_head").as_int64(), 12);
  EXPECT_EQ(j.at("n_positions").as_int64(), 512);
  EXPECT_EQ(j.at("n_inner").as_int64(), 3072);
  EXPECT_EQ(j.at("vocab_size").as_int64(), 50257);
  EXPECT_EQ(j.at("activation_function").as_string(), "gelu_new");
  EXPECT_EQ(j.at("layer_norm_epsilon").as_double(), 1e-5);
  EXPECT_EQ(j.at("resid_pdrop").as_double(), 0.1);
  EXPECT_EQ(j.at("embd_pdrop").as_double(), 0.1);
  EXPECT_EQ(j.at("attn_pdrop").as_double(), 0.1);
  EXPECT_EQ(j.at("initializer_range").as_double(), 0.02);
  EXPECT_TRUE(j.at("tie_word_embeddings").as_bool());
  EXPECT_EQ(j.at("eos_token_id").as_int64(), 50256);
  EXPECT_EQ(gpt2_dims_from_hf_config(j), Gpt2Dims::from_config(cfg));
}

// A gpt2 config that carries n_kv_head is refused; the grouped-query model type needs it.
TEST(HfGpt2Names, GroupedQueryConfigsAreTheirOwnModelType) {
  Json c = Json::object({{"model_type", "gpt2"}, {"vocab_size", 11}, {"n_positions", 8}, {"n_embd", 8},
                         {"n_layer", 2}, {"n_head", 4}, {"n_kv_head", 2}});
  std::string e = test::error_of([&] { gpt2_dims_from_hf_config(c); });
  EXPECT_NE(e.find("n_kv_head in a \"gpt2\" config"), std::string::npos) << e;
  c.set("model_type", kGqaModelType);
  const Gpt2Dims d = gpt2_dims_from_hf_config(c);
  EXPECT_EQ(d.kv_heads(), 2);
  EXPECT_EQ(gpt2_param_shape("h.1.attn.c_attn.weight", d), (Shape{8 + 2 * 2 * 2, 8}));
  EXPECT_EQ(gpt2_param_shape("h.1.attn.c_attn.bias", d), (Shape{16}));
  c.set("n_kv_head", 3);
  e = test::error_of([&] { gpt2_dims_from_hf_config(c); });
  EXPECT_NE(e.find("n_head = 4 is not a multiple of n_kv_head = 3"), std::string::npos) << e;
  c.set("model_type", "llama");
  e = test::error_of([&] { gpt2_dims_from_hf_config(c); });
  EXPECT_NE(e.find("expected \"gpt2\""), std::string::npos) << e;
}

TEST(HfGpt2Names, ReadsHubConfigJson) {
  // The hub's gpt2 config.json (abridged): n_inner null means 4 * n_embd.
  const Json hub = Json::parse(R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12,
    "n_positions": 1024, "vocab_size": 50257})");
  EXPECT_EQ(gpt2_dims_from_hf_config(hub), (Gpt2Dims{50257, 1024, 768, 12, 12, 3072}));
  EXPECT_THROW(gpt2_dims_from_hf_config(Json::parse(R"({"model_type": "llama"})")), Error);
  EXPECT_THROW(gpt2_dims_from_hf_config(Json::parse(R"({"model_type": "gpt2", "n_embd": 768})")), Error);
}

}  // namespace
}  // namespace ft
