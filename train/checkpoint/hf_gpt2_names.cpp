#include "train/checkpoint/hf_gpt2_names.h"

#include <cstring>
#include <map>

#include "core/error.h"

namespace ft {

namespace {

// One row per per-block parameter: our suffix, HF suffix, whether HF stores it transposed (a
// Conv1D weight), and its shape in our orientation.
struct BlockRule {
  const char* ours;
  const char* hf;
  bool transposed;
  Shape (*shape)(const Gpt2Dims&);
};
Shape vec_c(const Gpt2Dims& d) { return {d.n_embd}; }
Shape vec_3c(const Gpt2Dims& d) { return {d.qkv_dim()}; }
Shape vec_f(const Gpt2Dims& d) { return {d.n_inner}; }
Shape mat_3c_c(const Gpt2Dims& d) { return {d.qkv_dim(), d.n_embd}; }
Shape mat_c_c(const Gpt2Dims& d) { return {d.n_embd, d.n_embd}; }
Shape mat_f_c(const Gpt2Dims& d) { return {d.n_inner, d.n_embd}; }
Shape mat_c_f(const Gpt2Dims& d) { return {d.n_embd, d.n_inner}; }

const BlockRule kBlockRules[] = {
    {"ln_1.weight", "ln_1.weight", false, vec_c},
    {"ln_1.bias", "ln_1.bias", false, vec_c},
    {"attn.c_attn.weight", "attn.c_attn.weight", true, mat_3c_c},
    {"attn.c_attn.bias", "attn.c_attn.bias", false, vec_3c},
    {"attn.c_proj.weight", "attn.c_proj.weight", true, mat_c_c},
    {"attn.c_proj.bias", "attn.c_proj.bias", false, vec_c},
    {"ln_2.weight", "ln_2.weight", false, vec_c},
    {"ln_2.bias", "ln_2.bias", false, vec_c},
    {"mlp.c_fc.weight", "mlp.c_fc.weight", true, mat_f_c},
    {"mlp.c_fc.bias", "mlp.c_fc.bias", false, vec_f},
    {"mlp.c_proj.weight", "mlp.c_proj.weight", true, mat_c_f},
    {"mlp.c_proj.bias", "mlp.c_proj.bias", false, vec_c},
};
constexpr const char* kOursPrefix = "h.";
constexpr const char* kHfPrefix = "transformer.h.";

// The rule of a "h.<i>.<suffix>" name, with <i> in `index`; nullptr for other names.
const BlockRule* block_rule(const std::string& ours, std::string* index) {
  const size_t plen = std::strlen(kOursPrefix);
  if (ours.compare(0, plen, kOursPrefix) != 0) return nullptr;
  const size_t dot = ours.find('.', plen);
  if (dot == std::string::npos) return nullptr;
  *index = ours.substr(plen, dot - plen);
  if (index->empty() || index->find_first_not_of("0123456789") != std::string::npos) return nullptr;
  const std::string suffix = ours.substr(dot + 1);
  for (const auto& r : kBlockRules) {
    if (suffix == r.ours) return &r;
  }
  return nullptr;
}

Shape transposed_shape(const Shape& s) { return {s[1], s[0]}; }

// (r, c) -> (c, r), on the CPU. Exact: no arithmetic touches the values.
Tensor transpose_2d(const Tensor& t) { return t.to(Device::cpu()).transpose(0, 1).contiguous(); }

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

Gpt2Dims Gpt2Dims::from_config(const TrainConfig& cfg) {
  return Gpt2Dims{cfg.vocab_size, cfg.max_seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.d_ff, cfg.n_kv_heads};
}

bool Gpt2Dims::operator==(const Gpt2Dims& o) const {
  return vocab_size == o.vocab_size && n_positions == o.n_positions && n_embd == o.n_embd && n_layer == o.n_layer &&
         n_head == o.n_head && n_inner == o.n_inner && kv_heads() == o.kv_heads();
}

std::vector<std::string> gpt2_param_names(int64_t n_layers) {
  std::vector<std::string> names = {"wte.weight", "wpe.weight"};
  for (int64_t i = 0; i < n_layers; ++i) {
    for (const auto& r : kBlockRules) names.push_back(str(kOursPrefix, i, ".", r.ours));
  }
  names.push_back("ln_f.weight");
  names.push_back("ln_f.bias");
  return names;
}

std::string hf_gpt2_name(const std::string& ours, bool* transposed) {
  if (transposed) *transposed = false;
  if (ours == "wte.weight") return "transformer.wte.weight";
  if (ours == "wpe.weight") return "transformer.wpe.weight";
  if (ours == "ln_f.weight" || ours == "ln_f.bias") return "transformer." + ours;
  std::string index;
  if (const BlockRule* r = block_rule(ours, &index)) {
    if (transposed) *transposed = r->transposed;
    return str(kHfPrefix, index, ".", r->hf);
  }
  throw Error(str("[hf_gpt2] '", ours, "' is not a GPT-2 parameter name (see train/checkpoint/hf_gpt2_names.h)"));
}

Shape gpt2_param_shape(const std::string& ours, const Gpt2Dims& d) {
  if (ours == "wte.weight") return {d.vocab_size, d.n_embd};
  if (ours == "wpe.weight") return {d.n_positions, d.n_embd};
  if (ours == "ln_f.weight" || ours == "ln_f.bias") return {d.n_embd};
  std::string index;
  if (const BlockRule* r = block_rule(ours, &index)) return r->shape(d);
  throw Error(str("[hf_gpt2] '", ours, "' is not a GPT-2 parameter name (see train/checkpoint/hf_gpt2_names.h)"));
}

std::vector<NamedTensor> to_hf_gpt2(const std::vector<NamedTensor>& ours, const Gpt2Dims& dims) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& t : ours) {
    hf_gpt2_name(t.name);  // throws on a foreign name
    FT_CHECK_ARG(by_name.emplace(t.name, &t.tensor).second, "[hf_gpt2] parameter '", t.name, "' given twice");
  }
  std::vector<NamedTensor> out;
  for (const auto& name : gpt2_param_names(dims.n_layer)) {
    const auto it = by_name.find(name);
    FT_CHECK_ARG(it != by_name.end(), "[hf_gpt2] parameter '", name, "' is missing");
    const Tensor& t = *it->second;
    const Shape want = gpt2_param_shape(name, dims);
    FT_CHECK_ARG(t.shape() == want, "[hf_gpt2] parameter '", name, "' has shape ", t.shape(), ", expected ", want);
    bool transposed = false;
    const std::string hf = hf_gpt2_name(name, &transposed);
    out.push_back({hf, transposed ? transpose_2d(t) : t.to(Device::cpu())});
    by_name.erase(it);
  }
  FT_CHECK_ARG(by_name.empty(), "[hf_gpt2] parameter '", by_name.begin()->first, "' belongs to no block of a ",
               dims.n_layer, "-layer model");
  return out;
}

std::vector<NamedTensor> from_hf_gpt2(const std::vector<NamedTensor>& hf, const Gpt2Dims& dims) {
  // Normalise to the prefixed names; drop the mask buffers older transformers versions saved.
  std::map<std::string, const Tensor*> by_name;
  const Tensor* lm_head = nullptr;
  for (const auto& t : hf) {
    if (t.name == "lm_head.weight") {
      lm_head = &t.tensor;
      continue;
    }
    const bool prefixed = t.name.compare(0, 12, "transformer.") == 0;
    const std::string name = prefixed ? t.name : "transformer." + t.name;
    const size_t n = name.size();
    if (name.compare(0, 14, kHfPrefix) == 0 &&
        ((n > 10 && name.compare(n - 10, 10, ".attn.bias") == 0) || (n > 17 && name.compare(n - 17, 17, ".attn.masked_bias") == 0)))
      continue;
    FT_CHECK_ARG(by_name.emplace(name, &t.tensor).second, "[hf_gpt2] tensor '", t.name, "' appears twice");
  }
  std::vector<NamedTensor> out;
  for (const auto& ours : gpt2_param_names(dims.n_layer)) {
    bool transposed = false;
    const std::string name = hf_gpt2_name(ours, &transposed);
    const auto it = by_name.find(name);
    FT_CHECK_ARG(it != by_name.end(), "[hf_gpt2] tensor '", name, "' is missing");
    const Tensor& t = *it->second;
    const Shape want = gpt2_param_shape(ours, dims);
    const Shape want_hf = transposed ? transposed_shape(want) : want;
    FT_CHECK_ARG(t.shape() == want_hf, "[hf_gpt2] tensor '", name, "' has shape ", t.shape(), ", expected ", want_hf);
    out.push_back({ours, transposed ? transpose_2d(t) : t.to(Device::cpu())});
    by_name.erase(it);
  }
  FT_CHECK_ARG(by_name.empty(), "[hf_gpt2] unexpected tensor '", by_name.begin()->first, "' for a ", dims.n_layer,
               "-layer GPT-2");
  if (lm_head) {
    FT_CHECK_ARG(bitwise_equal(*lm_head, out[0].tensor),
                 "[hf_gpt2] lm_head.weight differs from transformer.wte.weight; flashtrain ties the output head to the "
                 "token embedding and cannot load an untied model");
  }
  return out;
}

Json hf_gpt2_config_json(const TrainConfig& cfg) {
  // GPT2Config field names; bos/eos are GPT-2's <|endoftext|> when the vocabulary has it.
  const bool has_eot = cfg.vocab_size > 50256;
  const Gpt2Dims dims = Gpt2Dims::from_config(cfg);
  Json j = Json::object({
      {"architectures", Json::array({"GPT2LMHeadModel"})},
      {"model_type", "gpt2"},
      {"vocab_size", cfg.vocab_size},
      {"n_positions", cfg.max_seq_len},
      {"n_ctx", cfg.max_seq_len},
      {"n_embd", cfg.d_model},
      {"n_layer", cfg.n_layers},
      {"n_head", cfg.n_heads},
      {"n_inner", cfg.d_ff},
      // GPT-2's GELU is the tanh approximation, which HF calls gelu_new.
      {"activation_function", cfg.activation == Activation::Gelu ? "gelu_new" : "relu"},
      {"resid_pdrop", cfg.dropout},
      {"embd_pdrop", cfg.dropout},
      {"attn_pdrop", cfg.dropout},
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", cfg.initializer_range},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
      {"use_cache", true},
      {"bos_token_id", has_eot ? Json(50256) : Json()},
      {"eos_token_id", has_eot ? Json(50256) : Json()},
      {"torch_dtype", "float32"},
  });
  if (dims.grouped()) {  // not GPT-2: see kGqaModelType
    j.set("architectures", Json::array({}));
    j.set("model_type", kGqaModelType);
    j.set("n_kv_head", dims.kv_heads());
  }
  return j;
}

Gpt2Dims gpt2_dims_from_hf_config(const Json& c, const std::string& source) {
  FT_CHECK_ARG(c.is_object(), source, ": expected a JSON object");
  const Json* type = c.find("model_type");
  const bool gqa = type && type->is_string() && type->as_string() == kGqaModelType;
  FT_CHECK_ARG(gqa || (type && type->is_string() && type->as_string() == "gpt2"), source, ": model_type is ",
               type ? type->dump() : std::string("missing"), ", expected \"gpt2\" (or \"", kGqaModelType,
               "\", flashtrain's grouped-query attention)");
  auto get = [&](const char* key, int64_t fallback) -> int64_t {
    const Json* v = c.find(key);
    if (!v || v->is_null()) {
      FT_CHECK_ARG(fallback > 0, source, ": ", key, " is missing");
      return fallback;
    }
    FT_CHECK_ARG(v->type() == Json::Type::Int && v->as_int64() > 0, source, ": ", key, " must be a positive integer, got ",
                 v->dump());
    return v->as_int64();
  };
  Gpt2Dims d;
  d.vocab_size = get("vocab_size", 0);
  d.n_positions = get("n_positions", 0);
  d.n_embd = get("n_embd", 0);
  d.n_layer = get("n_layer", 0);
  d.n_head = get("n_head", 0);
  d.n_inner = get("n_inner", 4 * d.n_embd);
  if (gqa) {
    d.n_kv_head = get("n_kv_head", 0);
    FT_CHECK_ARG(d.n_head % d.n_kv_head == 0, source, ": n_head = ", d.n_head, " is not a multiple of n_kv_head = ",
                 d.n_kv_head);
  } else {
    FT_CHECK_ARG(!c.find("n_kv_head"), source, ": n_kv_head in a \"gpt2\" config; grouped-query attention models are "
                 "model_type \"", kGqaModelType, "\"");
  }
  const Json* tie = c.find("tie_word_embeddings");
  FT_CHECK_ARG(!tie || (tie->is_bool() && tie->as_bool()), source,
               ": tie_word_embeddings is false; flashtrain ties the output head to the token embedding");
  return d;
}

}  // namespace ft
