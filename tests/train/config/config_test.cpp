#include <gtest/gtest.h>

#include <tuple>

#include <string>

#include "core/error.h"
#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/config/config.h"
#include "train/model_config.h"

namespace ft {
namespace {

using test::error_of;

std::string parse_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { parse_config(yaml, "t.yaml", overrides); });
}

TEST(Config, Gpt2SmallHasExactlyTheIssueValues) {
  const TrainConfig c = load_config(test::repo_root() + "/configs/gpt2-small.yaml");
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.d_model, 768);
  EXPECT_EQ(c.n_layers, 12);
  EXPECT_EQ(c.n_heads, 12);
  EXPECT_EQ(c.d_ff, 3072);
  EXPECT_EQ(c.dropout, 0.1);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_EQ(c.lr, 1e-4);
  EXPECT_EQ(c.betas[0], 0.9);
  EXPECT_EQ(c.betas[1], 0.95);
  EXPECT_EQ(c.eps, 1e-8);
  EXPECT_EQ(c.weight_decay, 0.0);
  EXPECT_EQ(c.warmup_steps, 1000);
  EXPECT_EQ(c.lr_decay, LrDecay::Cosine);
  EXPECT_EQ(c.block_size, 128);
  EXPECT_TRUE(c.use_flash_attention);
  EXPECT_EQ(c.activation, Activation::Gelu);
  EXPECT_EQ(c.initializer_range, 0.02);
  EXPECT_EQ(c.gradient_accumulation_steps, 16);
  EXPECT_EQ(c.mixed_precision, MixedPrecision::BF16);
  EXPECT_TRUE(c.compile_model);
  EXPECT_EQ(c.device, DeviceChoice::Auto);
  EXPECT_EQ(c.epochs, 5);
  EXPECT_EQ(c.grad_clip, 1.0);
  EXPECT_EQ(c.out_dir, "runs/gpt2-small");
  EXPECT_EQ(c.train_data, std::vector<std::string>{"data/kjv/train_*.bin"});
  EXPECT_EQ(c.val_data, std::vector<std::string>{"data/kjv/val_*.bin"});
}

TEST(Config, NaiveDiffersOnlyInFlashAttention) {
  const TrainConfig flash = load_config(test::repo_root() + "/configs/gpt2-small.yaml");
  TrainConfig naive = load_config(test::repo_root() + "/configs/gpt2-small-naive.yaml");
  EXPECT_FALSE(naive.use_flash_attention);
  EXPECT_NE(naive, flash);
  naive.use_flash_attention = true;
  EXPECT_EQ(naive, flash);
}

TEST(Config, Gpt2FinetuneFitsOpenAIsGpt2AndFineTunes) {
  const TrainConfig c = load_config(test::repo_root() + "/configs/gpt2-finetune.yaml");
  const TrainConfig small = load_config(test::repo_root() + "/configs/gpt2-small.yaml");
  // GPT-2 small's dimensions (checked above) and at most the hub gpt2's 1024 positions, which
  // --init-from crops to max_seq_len.
  EXPECT_EQ(std::make_tuple(c.vocab_size, c.d_model, c.n_layers, c.n_heads, c.d_ff),
            std::make_tuple(small.vocab_size, small.d_model, small.n_layers, small.n_heads, small.d_ff));
  EXPECT_LE(c.max_seq_len, 1024);
  EXPECT_EQ(c.activation, Activation::Gelu);
  // A fine-tuning run: a rate below pretraining's, a short warmup, few steps, the user's data.
  EXPECT_LT(c.lr, small.lr);
  EXPECT_LE(c.warmup_steps, 20);
  EXPECT_GT(c.max_steps, 0);
  EXPECT_LE(c.max_steps, 500);
  EXPECT_EQ(c.train_data, std::vector<std::string>{"data/mine/train_*.bin"});
  EXPECT_EQ(c.val_data, std::vector<std::string>{"data/mine/val_*.bin"});
}

TEST(Config, TinyIsSmallAndCpuFriendly) {
  const TrainConfig c = load_config(test::repo_root() + "/configs/tiny.yaml");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.d_model, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.block_size, 64);
  EXPECT_EQ(c.mixed_precision, MixedPrecision::FP32);
  EXPECT_NE(c.device, DeviceChoice::Cuda);
  EXPECT_GT(c.max_steps, 50);  // the "loss falls over 50 steps" test fits in it
  EXPECT_LE(c.max_steps, 500);
}

TEST(Config, DefaultsAreTheGpt2SmallFile) {
  EXPECT_NO_THROW(validate_config(TrainConfig{}));
  // Omitted keys take these defaults, so the echo of a sparse file is the gpt2-small run.
  EXPECT_EQ(parse_config("", "empty.yaml"), load_config(test::repo_root() + "/configs/gpt2-small.yaml"));
}

TEST(Config, UnknownKeyNamesValidKeysAndSuggests) {
  const std::string e = parse_error("d_model: 64\nn_head: 4\n");
  EXPECT_EQ(e.rfind("t.yaml:2: unknown key 'n_head' (did you mean 'n_heads'?); valid keys: vocab_size, d_model, ", 0), 0u) << e;
  EXPECT_NE(e.find("out_dir"), std::string::npos);
  EXPECT_EQ(e.find('\n'), std::string::npos);  // one line
  // Nothing close: no suggestion.
  EXPECT_EQ(parse_error("banana: 1\n").find("did you mean"), std::string::npos);
}

TEST(Config, WrongTypesNameKeyAndValue) {
  EXPECT_EQ(parse_error("d_model: 7.5\n"), "t.yaml:1: d_model expects an integer, got '7.5'");
  EXPECT_EQ(parse_error("lr: fast\n"), "t.yaml:1: lr expects a number, got 'fast'");
  EXPECT_EQ(parse_error("d_model: \"768\"\n"), "t.yaml:1: d_model expects an integer, got the string \"768\"");
  EXPECT_EQ(parse_error("use_flash_attention: yes\n"), "t.yaml:1: use_flash_attention expects true or false, got 'yes'");
  EXPECT_EQ(parse_error("betas: 0.9\n"), "t.yaml:1: betas expects a list of two numbers [beta1, beta2], got '0.9'");
  EXPECT_EQ(parse_error("betas: [0.9, 0.95, 0.99]\n"),
            "t.yaml:1: betas expects a list of two numbers [beta1, beta2], got '[0.9, 0.95, 0.99]'");
  EXPECT_EQ(parse_error("lr:\n"), "t.yaml:1: lr expects a number, got 'null'");
  EXPECT_EQ(parse_error("n_layers: {a: 1}\n"), "t.yaml:1: n_layers expects an integer, got '{a: 1}'");
  EXPECT_EQ(parse_error("lr: .inf\n"), "t.yaml:1: lr expects a number, got '.inf'");
  EXPECT_EQ(parse_error("lr: inf\n"), "t.yaml:1: lr = inf is not a finite number");
}

TEST(Config, RangesNameKeyAndValue) {
  EXPECT_EQ(parse_error("dropout: 1.0\n"), "t.yaml:1: dropout = 1.0 is out of range: must be in [0, 1)");
  EXPECT_EQ(parse_error("dropout: -0.1\n"), "t.yaml:1: dropout = -0.1 is out of range: must be in [0, 1)");
  EXPECT_EQ(parse_error("d_model: 0\n"), "t.yaml:1: d_model = 0 is out of range: must be > 0");
  EXPECT_EQ(parse_error("lr: 0\n"), "t.yaml:1: lr = 0 is out of range: must be > 0");
  EXPECT_EQ(parse_error("betas: [0.9, 1.0]\n"), "t.yaml:1: betas = [0.9, 1.0] is out of range: each must be in [0, 1)");
  EXPECT_EQ(parse_error("weight_decay: -1\n"), "t.yaml:1: weight_decay = -1 is out of range: must be >= 0");
  EXPECT_EQ(parse_error("warmup_steps: -5\n"), "t.yaml:1: warmup_steps = -5 is out of range: must be >= 0");
  EXPECT_EQ(parse_error("seed: -1\n"), "t.yaml:1: seed = -1 is out of range: must be >= 0");
  EXPECT_EQ(parse_error("head_chunk_mib: -1\n"), "t.yaml:1: head_chunk_mib = -1 is out of range: must be >= 0");
  EXPECT_EQ(parse_error("min_lr_ratio: 2\n"), "t.yaml:1: min_lr_ratio = 2 is out of range: must be in [0, 1]");
  EXPECT_EQ(parse_error("d_model: 99999999999999999999\n"), "t.yaml:1: d_model = 99999999999999999999 does not fit a 64-bit integer");
}

TEST(Config, EnumsAndMixedPrecisionBooleans) {
  EXPECT_EQ(parse_config("mixed_precision: true\n", "t").mixed_precision, MixedPrecision::BF16);
  EXPECT_EQ(parse_config("mixed_precision: false\n", "t").mixed_precision, MixedPrecision::FP32);
  EXPECT_EQ(parse_config("mixed_precision: fp16\n", "t").mixed_precision, MixedPrecision::FP16);
  EXPECT_EQ(parse_config("device: cpu\nlr_decay: linear\nactivation: relu\n", "t").device, DeviceChoice::Cpu);
  EXPECT_EQ(parse_error("mixed_precision: fp8\n"),
            "t.yaml:1: mixed_precision = fp8 is not one of bf16 | fp16 | fp32 | true (= bf16) | false (= fp32)");
  EXPECT_EQ(parse_error("device: gpu\n"), "t.yaml:1: device = gpu is not one of auto | cuda | cpu");
  EXPECT_EQ(parse_error("lr_decay: step\n"), "t.yaml:1: lr_decay = step is not one of cosine | linear | constant");
  EXPECT_EQ(parse_error("activation: swish\n"), "t.yaml:1: activation = swish is not one of gelu | relu");
  EXPECT_EQ(parse_config("", "t").zero1_transport, Zero1Transport::Auto);
  EXPECT_EQ(parse_config("zero1_transport: copy_engines\n", "t").zero1_transport, Zero1Transport::CopyEngines);
  EXPECT_EQ(parse_config("zero1_transport: nccl\n", "t").zero1_transport, Zero1Transport::Nccl);
  EXPECT_EQ(parse_error("zero1_transport: nvlink\n"),
            "t.yaml:1: zero1_transport = nvlink is not one of auto | nccl | copy_engines");
}

TEST(Config, CrossKeyRules) {
  EXPECT_EQ(parse_error("d_model: 768\nn_heads: 5\n"), "config: n_heads = 5 must divide d_model = 768");
  EXPECT_EQ(parse_error("block_size: 1024\n"),
            "config: block_size = 1024 must be <= max_seq_len = 512 (a sparse attention block cannot be longer than the sequence)");
  EXPECT_EQ(parse_error("val_data: []\n"),
            "config: eval_interval = 250 needs val_data (set val_data, or eval_interval: 0 to train without evaluation)");
  EXPECT_EQ(parse_error("val_data: []\neval_interval: 0\n"), "");
  EXPECT_EQ(parse_error("zero1: true\nlayernorm_fp32: true\n"), "");
  EXPECT_TRUE(parse_config("", "t").layernorm_fp32);
  EXPECT_FALSE(parse_config("layernorm_fp32: false\n", "t").layernorm_fp32);
  EXPECT_EQ(parse_error("vocab_size: 1000\ndocument_mask: true\n"),
            "config: document_mask needs vocab_size > 50256 (documents start at <|endoftext|> = 50256), got vocab_size = 1000");
}

TEST(Config, DocumentMaskIsOffUnlessSet) {
  EXPECT_FALSE(TrainConfig().document_mask);
  EXPECT_FALSE(parse_config("", "t").document_mask);
  EXPECT_TRUE(parse_config("document_mask: true\n", "t").document_mask);
  EXPECT_EQ(parse_error("document_mask: 2\n").rfind("t.yaml:1: document_mask", 0), 0u);
}

// n_kv_heads (grouped-query attention): 0, the default, is n_heads; otherwise a divisor of n_heads.
TEST(Config, NKvHeads) {
  EXPECT_EQ(parse_config("", "t").n_kv_heads, 0);
  EXPECT_EQ(parse_config("n_kv_heads: 4\n", "t").n_kv_heads, 4);
  EXPECT_EQ(parse_error("n_kv_heads: 5\n"),
            "config: n_heads = 12 must be a multiple of n_kv_heads = 5 (grouped-query attention; 0 means n_heads)");
  EXPECT_NE(parse_error("n_kv_heads: -1\n"), "");
  EXPECT_EQ(gpt_config_from(parse_config("n_kv_heads: 3\n", "t")).kv_heads(), 3);
  EXPECT_EQ(gpt_config_from(parse_config("", "t")).kv_heads(), 12);
}

TEST(Config, FileLevelErrors) {
  EXPECT_EQ(parse_error("lr: 1\nlr: 2\n"), "t.yaml:2: duplicate key 'lr'");
  EXPECT_EQ(parse_error("- a\n- b\n"), "t.yaml: expected a mapping of `key: value` lines at the top level");
  EXPECT_EQ(parse_error("lr: [1, 2\n").rfind("t.yaml:", 0), 0u);
  EXPECT_NE(parse_error("lr: [1, 2\n").find("YAML syntax error"), std::string::npos);
  const std::string missing = error_of([] { load_config("/nonexistent/x.yaml"); });
  EXPECT_EQ(missing, "config file /nonexistent/x.yaml: cannot open: No such file or directory");
}

TEST(Config, OverridesUseTheSameChecks) {
  const TrainConfig c = parse_config("d_model: 64\nn_heads: 4\n", "t",
                                     {"lr=3e-4", "betas=[0.8, 0.99]", "train_data=[a.bin, b/*.bin]", "n_heads=8"});
  EXPECT_EQ(c.lr, 3e-4);
  EXPECT_EQ(c.betas[0], 0.8);
  EXPECT_EQ(c.betas[1], 0.99);
  EXPECT_EQ(c.train_data, (std::vector<std::string>{"a.bin", "b/*.bin"}));
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(parse_error("", {"lr=abc"}), "--set lr=abc: lr expects a number, got 'abc'");
  EXPECT_EQ(parse_error("", {"lr"}), "--set lr: expected key=value (for example --set lr=3e-4 or --set betas=[0.9,0.99])");
  EXPECT_EQ(parse_error("", {"dropot=0.2"}).rfind("--set dropot=0.2: unknown key 'dropot' (did you mean 'dropout'?)", 0), 0u);
  // Cross-key rules run after all overrides: the last word counts.
  EXPECT_EQ(parse_error("", {"n_heads=5"}), "config: n_heads = 5 must divide d_model = 768");
  EXPECT_EQ(parse_error("", {"n_heads=5", "d_model=640"}), "");
}

TEST(Config, YamlAndJsonRoundTrip) {
  TrainConfig c = load_config(test::repo_root() + "/configs/tiny.yaml");
  c.lr = 1.0 / 3.0;  // needs all 17 digits
  c.seed = 9007199254740993ull;  // 2^53 + 1: not a double
  c.mixed_precision = MixedPrecision::FP16;
  c.train_data = {"a b/weird: name.bin", "*.bin"};  // needs quoting in YAML
  c.out_dir = "true";                               // a YAML keyword as a string
  const std::string yaml = config_to_yaml(c);
  EXPECT_NE(yaml.find("lr: 0.3333333333333333\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("mixed_precision: fp16\n"), std::string::npos) << yaml;
  EXPECT_EQ(parse_config(yaml, "echo"), c);
  EXPECT_EQ(config_from_json(Json::parse(config_to_json(c).dump())), c);
  EXPECT_EQ(config_to_json(c).members().size(), config_keys().size());
}

// A state.json from before `layernorm_fp32` existed has no such key: its run trained bf16 / f16
// LayerNorm parameters, so it reads as false, not as today's default (true); written keys win.
TEST(Config, StateJsonWithoutLayerNormFp32ReadsAsFalse) {
  const TrainConfig c = load_config(test::repo_root() + "/configs/tiny.yaml");
  ASSERT_TRUE(c.layernorm_fp32);
  std::string json = config_to_json(c).dump();
  EXPECT_TRUE(config_from_json(Json::parse(json)).layernorm_fp32);
  const std::string key = "\"layernorm_fp32\":true,";
  const size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos) << json;
  json.erase(at, key.size());
  EXPECT_FALSE(config_from_json(Json::parse(json)).layernorm_fp32);
}

}  // namespace
}  // namespace ft
