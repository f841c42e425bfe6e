#include "train/config/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "data/bpe_tokenizer.h"

namespace ft {

namespace {

// Each option enum's names in one table, which both the parser (read_enum) and to_string read, in
// the order the parser's messages list them.
template <class E>
using EnumNames = std::vector<std::pair<const char*, E>>;
template <class E>
const EnumNames<E>& enum_names();
#define FT_ENUM_NAMES(E, ...)                  \
  template <>                                  \
  const EnumNames<E>& enum_names() {           \
    static const EnumNames<E> t = {__VA_ARGS__}; \
    return t;                                  \
  }
FT_ENUM_NAMES(MixedPrecision, {"bf16", MixedPrecision::BF16}, {"fp16", MixedPrecision::FP16}, {"fp32", MixedPrecision::FP32})
FT_ENUM_NAMES(DeviceChoice, {"auto", DeviceChoice::Auto}, {"cuda", DeviceChoice::Cuda}, {"cpu", DeviceChoice::Cpu})
FT_ENUM_NAMES(LrDecay, {"cosine", LrDecay::Cosine}, {"linear", LrDecay::Linear}, {"constant", LrDecay::Constant})
FT_ENUM_NAMES(Activation, {"gelu", Activation::Gelu}, {"relu", Activation::Relu})
FT_ENUM_NAMES(Zero1Transport, {"auto", Zero1Transport::Auto}, {"nccl", Zero1Transport::Nccl},
              {"copy_engines", Zero1Transport::CopyEngines})
FT_ENUM_NAMES(GradReduceDType, {"fp32", GradReduceDType::FP32}, {"bf16", GradReduceDType::BF16})
#undef FT_ENUM_NAMES

template <class E>
const char* enum_name(E v) {
  for (const auto& [name, e] : enum_names<E>())
    if (e == v) return name;
  return "?";
}

}  // namespace

const char* to_string(MixedPrecision v) { return enum_name(v); }
const char* to_string(DeviceChoice v) { return enum_name(v); }
const char* to_string(LrDecay v) { return enum_name(v); }
const char* to_string(Activation v) { return enum_name(v); }
const char* to_string(Zero1Transport v) { return enum_name(v); }
const char* to_string(GradReduceDType v) { return enum_name(v); }

namespace {

// Where a value came from and which key it is for: every message starts "<source>: ".
struct Ctx {
  std::string source;
  std::string key;
};

[[noreturn]] void fail(const Ctx& c, const std::string& problem) { throw Error(str(c.source, ": ", problem)); }

// The value as the user wrote it, for messages: a scalar's text, or a collection in flow style.
std::string node_text(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "null";
  if (n.IsScalar()) return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// Quoted scalars ("768") are strings in YAML; numbers and booleans must be written plain.
bool is_plain_scalar(const YAML::Node& n) { return n.IsScalar() && n.Tag() != "!"; }

[[noreturn]] void fail_type(const Ctx& c, const char* expected, const YAML::Node& n) {
  if (n.IsScalar() && !is_plain_scalar(n)) fail(c, str(c.key, " expects ", expected, ", got the string \"", n.Scalar(), "\""));
  fail(c, str(c.key, " expects ", expected, ", got '", node_text(n), "'"));
}

int64_t read_int(const Ctx& c, const YAML::Node& n) {
  if (!is_plain_scalar(n)) fail_type(c, "an integer", n);
  const std::string& s = n.Scalar();
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0]))) fail_type(c, "an integer", n);
  if (errno == ERANGE) fail(c, str(c.key, " = ", s, " does not fit a 64-bit integer"));
  return v;
}

double read_double(const Ctx& c, const YAML::Node& n) {
  if (!is_plain_scalar(n)) fail_type(c, "a number", n);
  const std::string& s = n.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0]))) fail_type(c, "a number", n);
  if (!std::isfinite(v)) fail(c, str(c.key, " = ", s, " is not a finite number"));
  return v;
}

// YAML 1.2 core booleans only: yes/no/on/off are strings there, and guessing invites surprises.
bool parse_bool_text(const std::string& s, bool* out) {
  if (s == "true" || s == "True" || s == "TRUE") return *out = true, true;
  if (s == "false" || s == "False" || s == "FALSE") return *out = false, true;
  return false;
}

bool read_bool(const Ctx& c, const YAML::Node& n) {
  bool b = false;
  if (!is_plain_scalar(n) || !parse_bool_text(n.Scalar(), &b)) fail_type(c, "true or false", n);
  return b;
}

std::string read_string(const Ctx& c, const YAML::Node& n) {
  if (!n.IsScalar()) fail_type(c, "a string", n);
  if (n.Scalar().empty()) fail(c, str(c.key, " must not be empty"));
  return n.Scalar();
}

std::vector<std::string> read_string_list(const Ctx& c, const YAML::Node& n) {
  if (n.IsScalar()) return {read_string(c, n)};
  if (!n.IsSequence()) fail_type(c, "a path or a list of paths", n);
  std::vector<std::string> out;
  for (const auto& item : n) out.push_back(read_string(c, item));
  return out;
}

// One of the option names, exactly as listed (lower case).
template <class E>
E read_enum(const Ctx& c, const YAML::Node& n, const std::vector<std::pair<const char*, E>>& options) {
  std::string list;
  for (const auto& o : options) list += str(list.empty() ? "" : " | ", o.first);
  if (n.IsScalar()) {
    for (const auto& o : options) {
      if (n.Scalar() == o.first) return o.second;
    }
  }
  fail(c, str(c.key, " = ", node_text(n), " is not one of ", list));
}

// Range checks. Messages read "<key> = <value as written> is out of range: must be <rule>".
void require(const Ctx& c, const YAML::Node& n, bool ok, const std::string& rule) {
  if (!ok) fail(c, str(c.key, " = ", node_text(n), " is out of range: must be ", rule));
}

int64_t positive_int(const Ctx& c, const YAML::Node& n) {
  const int64_t v = read_int(c, n);
  require(c, n, v > 0, "> 0");
  return v;
}
int64_t non_negative_int(const Ctx& c, const YAML::Node& n) {
  const int64_t v = read_int(c, n);
  require(c, n, v >= 0, ">= 0");
  return v;
}
double positive_double(const Ctx& c, const YAML::Node& n) {
  const double v = read_double(c, n);
  require(c, n, v > 0, "> 0");
  return v;
}
double non_negative_double(const Ctx& c, const YAML::Node& n) {
  const double v = read_double(c, n);
  require(c, n, v >= 0, ">= 0");
  return v;
}
double unit_interval_open(const Ctx& c, const YAML::Node& n) {  // [0, 1)
  const double v = read_double(c, n);
  require(c, n, v >= 0 && v < 1, "in [0, 1)");
  return v;
}

Json string_list_json(const std::vector<std::string>& v) {
  Json a = Json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

// ---- the key table: one row per key, the single source of truth for parsing, order and output.
struct KeySpec {
  const char* name;
  std::function<void(TrainConfig&, const YAML::Node&, const Ctx&)> set;
  std::function<Json(const TrainConfig&)> get;
};

#define FT_INT_KEY(field, reader)                                                                    \
  KeySpec {                                                                                          \
    #field, [](TrainConfig& c, const YAML::Node& n, const Ctx& x) { c.field = reader(x, n); },      \
        [](const TrainConfig& c) { return Json(c.field); }                                          \
  }
#define FT_DOUBLE_KEY(field, reader) FT_INT_KEY(field, reader)
#define FT_BOOL_KEY(field) FT_INT_KEY(field, read_bool)
#define FT_ENUM_KEY(field)                                                                           \
  KeySpec {                                                                                          \
    #field,                                                                                          \
        [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {                                      \
          using E = std::decay_t<decltype(c.field)>;                                                 \
          c.field = read_enum<E>(x, n, enum_names<E>());                                             \
        },                                                                                           \
        [](const TrainConfig& c) { return Json(to_string(c.field)); }                               \
  }

const std::vector<KeySpec>& key_table() {
  static const std::vector<KeySpec> table = {
      FT_INT_KEY(vocab_size, positive_int),
      FT_INT_KEY(d_model, positive_int),
      FT_INT_KEY(n_layers, positive_int),
      FT_INT_KEY(n_heads, positive_int),
      FT_INT_KEY(n_kv_heads, non_negative_int),
      FT_INT_KEY(d_ff, positive_int),
      FT_DOUBLE_KEY(dropout, unit_interval_open),
      FT_INT_KEY(max_seq_len, positive_int),
      FT_DOUBLE_KEY(lr, positive_double),
      KeySpec{"betas",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {
                if (!n.IsSequence() || n.size() != 2) fail_type(x, "a list of two numbers [beta1, beta2]", n);
                for (size_t i = 0; i < 2; ++i) {
                  const double b = read_double(x, n[i]);
                  if (!(b >= 0 && b < 1)) fail(x, str("betas = ", node_text(n), " is out of range: each must be in [0, 1)"));
                  c.betas[i] = b;
                }
              },
              [](const TrainConfig& c) { return Json::array({c.betas[0], c.betas[1]}); }},
      FT_DOUBLE_KEY(eps, positive_double),
      FT_DOUBLE_KEY(weight_decay, non_negative_double),
      FT_INT_KEY(warmup_steps, non_negative_int),
      FT_ENUM_KEY(lr_decay),
      FT_INT_KEY(block_size, positive_int),
      FT_INT_KEY(sparse_window_blocks, non_negative_int),
      FT_INT_KEY(sparse_global_blocks, non_negative_int),
      FT_BOOL_KEY(use_flash_attention),
      FT_BOOL_KEY(document_mask),
      FT_ENUM_KEY(activation),
      FT_DOUBLE_KEY(initializer_range, positive_double),
      FT_INT_KEY(gradient_accumulation_steps, positive_int),
      KeySpec{"mixed_precision",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {
                bool b = false;  // the seed config writes true (= bf16) and false (= fp32)
                if (is_plain_scalar(n) && parse_bool_text(n.Scalar(), &b)) {
                  c.mixed_precision = b ? MixedPrecision::BF16 : MixedPrecision::FP32;
                  return;
                }
                if (n.IsScalar()) {
                  for (const auto& [name, v] : enum_names<MixedPrecision>()) {
                    if (n.Scalar() == name) {
                      c.mixed_precision = v;
                      return;
                    }
                  }
                }
                fail(x, str("mixed_precision = ", node_text(n),
                            " is not one of bf16 | fp16 | fp32 | true (= bf16) | false (= fp32)"));
              },
              [](const TrainConfig& c) { return Json(to_string(c.mixed_precision)); }},
      FT_BOOL_KEY(compile_model),
      FT_ENUM_KEY(device),
      FT_INT_KEY(epochs, positive_int),
      FT_INT_KEY(batch_size, positive_int),
      FT_INT_KEY(max_steps, non_negative_int),
      FT_DOUBLE_KEY(grad_clip, non_negative_double),
      KeySpec{"seed",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {
                // Kept within int64 so every tool that reads state.json reads it exactly.
                c.seed = static_cast<uint64_t>(non_negative_int(x, n));
              },
              [](const TrainConfig& c) { return Json(c.seed); }},
      KeySpec{"train_data",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {
                c.train_data = read_string_list(x, n);
                if (c.train_data.empty()) fail(x, "train_data must name at least one shard file, directory or glob");
              },
              [](const TrainConfig& c) { return string_list_json(c.train_data); }},
      KeySpec{"val_data",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) { c.val_data = read_string_list(x, n); },
              [](const TrainConfig& c) { return string_list_json(c.val_data); }},
      FT_INT_KEY(eval_interval, non_negative_int),
      FT_INT_KEY(eval_steps, positive_int),
      FT_INT_KEY(log_interval, positive_int),
      FT_INT_KEY(checkpoint_interval, non_negative_int),
      KeySpec{"out_dir", [](TrainConfig& c, const YAML::Node& n, const Ctx& x) { c.out_dir = read_string(x, n); },
              [](const TrainConfig& c) { return Json(c.out_dir); }},
      // ---- extra keys (beyond issue 5), each something a long run needs ----
      KeySpec{"min_lr_ratio",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {
                const double v = read_double(x, n);
                require(x, n, v >= 0 && v <= 1, "in [0, 1]");
                c.min_lr_ratio = v;
              },
              [](const TrainConfig& c) { return Json(c.min_lr_ratio); }},
      KeySpec{"loss_scale_init",
              [](TrainConfig& c, const YAML::Node& n, const Ctx& x) {
                const double v = read_double(x, n);
                require(x, n, v >= 1, ">= 1");
                c.loss_scale_init = v;
              },
              [](const TrainConfig& c) { return Json(c.loss_scale_init); }},
      FT_INT_KEY(loss_scale_growth_interval, positive_int),
      FT_BOOL_KEY(shuffle),
      FT_INT_KEY(keep_checkpoints, non_negative_int),
      FT_BOOL_KEY(deterministic),
      FT_INT_KEY(head_chunk_mib, non_negative_int),
      FT_BOOL_KEY(layernorm_fp32),
      FT_BOOL_KEY(zero1),
      FT_ENUM_KEY(zero1_transport),
      FT_DOUBLE_KEY(allreduce_bucket_mb, positive_double),
      FT_ENUM_KEY(grad_reduce_dtype),
      FT_DOUBLE_KEY(dist_timeout_s, positive_double),
  };
  return table;
}

#undef FT_INT_KEY
#undef FT_DOUBLE_KEY
#undef FT_BOOL_KEY
#undef FT_ENUM_KEY

const KeySpec* find_key(const std::string& name) {
  for (const auto& k : key_table()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

[[noreturn]] void fail_unknown_key(const std::string& source, const std::string& key) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& k : key_table()) {
    const size_t d = edit_distance(key, k.name);
    if (d < best_d) best_d = d, best = k.name;
  }
  std::string msg = str(source, ": unknown key '", key, "'");
  // Close enough to be a typo: at most 2 edits, and fewer than a third of the key's length.
  if (best_d <= 2 && best_d * 3 < std::max<size_t>(key.size(), 3)) msg += str(" (did you mean '", best, "'?)");
  msg += "; valid keys: ";
  for (size_t i = 0; i < config_keys().size(); ++i) msg += str(i ? ", " : "", config_keys()[i]);
  throw Error(msg);
}

void set_key(TrainConfig& cfg, const std::string& key, const YAML::Node& value, const std::string& source) {
  const KeySpec* spec = find_key(key);
  if (!spec) fail_unknown_key(source, key);
  spec->set(cfg, value, Ctx{source, key});
}

void apply_mapping(TrainConfig& cfg, const YAML::Node& root, const std::string& source) {
  if (!root.IsDefined() || root.IsNull()) return;  // an empty file: all defaults
  if (!root.IsMap()) throw Error(str(source, ": expected a mapping of `key: value` lines at the top level"));
  std::set<std::string> seen;
  for (const auto& kv : root) {
    const std::string where = str(source, ":", kv.first.Mark().line + 1);
    if (!kv.first.IsScalar()) throw Error(str(where, ": a key must be a plain name, got '", node_text(kv.first), "'"));
    const std::string key = kv.first.Scalar();
    if (!seen.insert(key).second) throw Error(str(where, ": duplicate key '", key, "'"));
    set_key(cfg, key, kv.second, where);
  }
}

YAML::Node load_yaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(str(source, ":", e.mark.line + 1, ":", e.mark.column + 1, ": YAML syntax error: ", e.msg));
  }
}

// Plain YAML output for simple words and paths; anything else goes out as a JSON string, which
// YAML reads as a double-quoted scalar.
bool yaml_plain_safe(const std::string& s) {
  if (s.empty()) return false;
  static const std::set<std::string> reserved = {"true", "false", "null", "yes", "no", "on", "off", "~",
                                                 "True", "False", "Null", "TRUE", "FALSE", "NULL", "Yes", "No"};
  if (reserved.count(s)) return false;
  const char first = s[0];
  if (!(std::isalpha(static_cast<unsigned char>(first)) || first == '_' || first == '/' || first == '.')) return false;
  for (const char ch : s) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.' || ch == '/' || ch == '*'))
      return false;
  }
  return true;
}

std::string yaml_value(const Json& v) {
  if (v.is_string()) return yaml_plain_safe(v.as_string()) ? v.as_string() : v.dump();
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.items().size(); ++i) out += str(i ? ", " : "", yaml_value(v.items()[i]));
    return out + "]";
  }
  return v.dump();
}

}  // namespace

const std::vector<std::string>& config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (const auto& spec : key_table()) k.push_back(spec.name);
    return k;
  }();
  return keys;
}

void apply_override(TrainConfig& cfg, const std::string& key_equals_value) {
  const std::string source = str("--set ", key_equals_value);
  const size_t eq = key_equals_value.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(str(source, ": expected key=value (for example --set lr=3e-4 or --set betas=[0.9,0.99])"));
  const std::string key = key_equals_value.substr(0, eq);
  const YAML::Node value = load_yaml(key_equals_value.substr(eq + 1), source);
  set_key(cfg, key, value, source);
}

void validate_config(const TrainConfig& cfg) {
  const std::string src = "config";
  if (cfg.d_model % cfg.n_heads != 0)
    throw Error(str(src, ": n_heads = ", cfg.n_heads, " must divide d_model = ", cfg.d_model));
  if (cfg.n_kv_heads > 0 && cfg.n_heads % cfg.n_kv_heads != 0)
    throw Error(str(src, ": n_heads = ", cfg.n_heads, " must be a multiple of n_kv_heads = ", cfg.n_kv_heads,
                    " (grouped-query attention; 0 means n_heads)"));
  if (cfg.block_size > cfg.max_seq_len)
    throw Error(str(src, ": block_size = ", cfg.block_size, " must be <= max_seq_len = ", cfg.max_seq_len,
                    " (a sparse attention block cannot be longer than the sequence)"));
  if (cfg.document_mask && cfg.vocab_size <= BpeTokenizer::kEndOfText)
    throw Error(str(src, ": document_mask needs vocab_size > ", BpeTokenizer::kEndOfText, " (documents start at <|endoftext|> = ",
                    BpeTokenizer::kEndOfText, "), got vocab_size = ", cfg.vocab_size));
  if (cfg.eval_interval > 0 && cfg.val_data.empty())
    throw Error(str(src, ": eval_interval = ", cfg.eval_interval,
                    " needs val_data (set val_data, or eval_interval: 0 to train without evaluation)"));
}

TrainConfig parse_config(const std::string& yaml_text, const std::string& source,
                         const std::vector<std::string>& overrides) {
  TrainConfig cfg;
  apply_mapping(cfg, load_yaml(yaml_text, source), source);
  for (const auto& o : overrides) apply_override(cfg, o);
  validate_config(cfg);
  return cfg;
}

TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(str("config file ", path, ": cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, overrides);
}

Json config_to_json(const TrainConfig& cfg) {
  Json j = Json::object();
  for (const auto& spec : key_table()) j.set(spec.name, spec.get(cfg));
  return j;
}

std::string config_to_yaml(const TrainConfig& cfg) {
  std::string out;
  for (const auto& spec : key_table()) out += str(spec.name, ": ", yaml_value(spec.get(cfg)), "\n");
  return out;
}

TrainConfig config_from_json(const Json& j, const std::string& source) {
  FT_CHECK_ARG(j.is_object(), source, ": expected an object, got ", j.type_name());
  // JSON is YAML, so the object goes through the same per-key checks as a config file.
  TrainConfig cfg = parse_config(j.dump(), source);
  // Checkpoints from before layernorm_fp32 existed trained with bf16 / f16 LayerNorm parameters;
  // reading them as the new default would resume a different model from the one saved.
  if (!j.find("layernorm_fp32")) cfg.layernorm_fp32 = false;
  return cfg;
}

bool operator==(const TrainConfig& a, const TrainConfig& b) { return config_to_json(a) == config_to_json(b); }

std::ostream& operator<<(std::ostream& os, const TrainConfig& cfg) { return os << config_to_json(cfg).dump(); }

}  // namespace ft
