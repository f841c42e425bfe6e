// The training configuration: YAML with flat keys -> a validated TrainConfig.
//
// The keys are those of issue 5 (the GPT3Config names plus the run keys), and a few more a long run
// needs, marked "extra" below. Every key has a default (the gpt2-small value where the issue
// names one), so a config file lists what it means and the start-of-run echo shows the rest.
//
// Every error is a one-line ft::Error that names where the value came from (the file, or
// "--set"), the key and the value:
//   configs/x.yaml: unknown key 'n_head' (did you mean 'n_heads'?); valid keys: vocab_size, ...
//   configs/x.yaml: dropout = 1.5 is out of range: must be in [0, 1)
//   --set lr=abc: lr expects a number, got 'abc'
//   config: n_heads = 5 must divide d_model = 768
#pragma once

#include <array>
#include <iosfwd>
#include <cstdint>
#include <string>
#include <vector>

#include "train/config/json.h"

namespace ft {

enum class MixedPrecision { BF16, FP16, FP32 };
enum class DeviceChoice { Auto, Cuda, Cpu };
enum class LrDecay { Cosine, Linear, Constant };
enum class Activation { Gelu, Relu };
enum class GradReduceDType { FP32, BF16 };
enum class Zero1Transport { Auto, Nccl, CopyEngines };

const char* to_string(MixedPrecision v);  // "bf16" | "fp16" | "fp32"
const char* to_string(DeviceChoice v);    // "auto" | "cuda" | "cpu"
const char* to_string(LrDecay v);         // "cosine" | "linear" | "constant"
const char* to_string(Activation v);      // "gelu" | "relu"
const char* to_string(GradReduceDType v); // "fp32" | "bf16"
const char* to_string(Zero1Transport v);  // "auto" | "nccl" | "copy_engines"

struct TrainConfig {
  // ---- model ----
  int64_t vocab_size = 50257;
  int64_t d_model = 768;      // C
  int64_t n_layers = 12;      // L
  int64_t n_heads = 12;       // H; must divide d_model
  // Extra: H_kv key/value heads for grouped-query attention (1: multi-query), a divisor of
  // n_heads; 0 (the default) means n_heads, GPT-2's multi-head attention. Checkpoints of such a
  // model are not Hugging Face GPT-2 files (GPT-2 has no grouped-query attention).
  int64_t n_kv_heads = 0;
  int64_t d_ff = 3072;        // MLP hidden width
  double dropout = 0.1;       // embeddings, attention probabilities, residual branches
  int64_t max_seq_len = 512;  // T: tokens per training sequence, and the learned position embeddings
  // Block-sparse attention (issue 3): the sequence is cut into blocks of block_size tokens and a
  // query block sees the sparse_window_blocks blocks ending at its own plus the first
  // sparse_global_blocks blocks (causal within). sparse_window_blocks = 0 (the default) is dense
  // causal attention and leaves block_size unused. The two sparse_* keys are our additions.
  int64_t block_size = 128;
  int64_t sparse_window_blocks = 0;
  int64_t sparse_global_blocks = 0;
  bool use_flash_attention = true;
  // extra (issue 19): each token attends only within its own document of its row (documents start
  // at <|endoftext|>, 50256, as data/prepare.h writes them; ops/document_mask.h). Needs
  // vocab_size > 50256. false: plain causal attention across document boundaries.
  bool document_mask = false;
  Activation activation = Activation::Gelu;  // gelu is GPT-2's tanh form
  double initializer_range = 0.02;

  // ---- optimisation ----
  double lr = 1e-4;  // peak learning rate, reached at the end of warmup
  std::array<double, 2> betas = {0.9, 0.95};
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t warmup_steps = 1000;
  LrDecay lr_decay = LrDecay::Cosine;
  double min_lr_ratio = 0.1;  // extra: the decay floor is min_lr_ratio * lr (train/lr_schedule.h)
  double grad_clip = 1.0;     // global-norm clip; 0 turns clipping off
  int64_t gradient_accumulation_steps = 16;
  MixedPrecision mixed_precision = MixedPrecision::BF16;
  // extra: fp16 dynamic loss scaling. Start at loss_scale_init, halve on inf/nan (the step is
  // skipped), double after loss_scale_growth_interval clean steps in a row.
  double loss_scale_init = 65536.0;
  int64_t loss_scale_growth_interval = 2000;

  // ---- run ----
  int64_t batch_size = 1;     // B, sequences per micro-batch per GPU
  int64_t epochs = 5;
  int64_t max_steps = 0;      // optimizer steps; 0 = run `epochs` over the data
  bool compile_model = true;  // capture a micro-step in a CUDA graph (ignored on CPU)
  DeviceChoice device = DeviceChoice::Auto;
  uint64_t seed = 1337;
  bool shuffle = true;        // extra: shuffle windows each epoch (by seed and epoch)
  // Files, directories (their <split>_*.bin) or globs of token shards; the defaults are what
  // `flashtrain prepare --corpus kjv --out data/kjv` writes. val_data may be empty only when
  // eval_interval is 0.
  std::vector<std::string> train_data = {"data/kjv/train_*.bin"};
  std::vector<std::string> val_data = {"data/kjv/val_*.bin"};
  int64_t eval_interval = 250;  // steps between evaluations; 0 = none
  int64_t eval_steps = 20;      // validation batches per evaluation
  int64_t log_interval = 10;
  int64_t checkpoint_interval = 500;  // 0 = only at the end of the run
  int64_t keep_checkpoints = 3;        // extra: keep the newest N checkpoints; 0 = keep all
  // extra: bit-identical gradients for identical inputs (flash attention accumulates dQ in a fixed
  // order instead of by atomics), which is what makes a resumed run repeat the uninterrupted one.
  bool deterministic = true;
  // extra: the training step's head runs in chunks of rows holding at most this many MiB of logits
  // each (autograd::linear_cross_entropy_mean): GPT-2-small at B T = 16384 has 1.6 GB of them, so 4
  // chunks and a 1.1 GB lower peak, for about 1% of tokens/s (bench/results/train-h200-s36.md).
  // 0: every row's logits at once.
  int64_t head_chunk_mib = 512;
  // extra: the LayerNorms' weight and bias stay fp32 under bf16 / f16 (their kernels read them so;
  // the master weights serve as the working copy). PyTorch's autocast does this; with our bf16
  // residual stream, bf16 LayerNorm parameters made one checkpoint's wpe gradient 2.85x autocast's
  // error (bench/results/hf-cross-check-h200-s38.md); fp32 ones 0.53x, at the same speed and peak
  // (session 39). Under zero1 every step sums their owners' values over the ranks (train/zero1.h).
  // A state.json written before this key existed reads as false: what those runs trained with.
  bool layernorm_fp32 = true;

  // ---- data parallel (issue 7; one process per GPU, batch_size is per GPU) ----
  bool zero1 = false;                 // shard AdamW's state (and the update) across ranks
  // How ZeRO-1 reduce-scatters the gradients (issue 20): copy_engines moves each bucket to its
  // owners with the GPUs' copy engines during the backward (CUDA IPC; every rank on one host), which
  // unlike NCCL's kernels takes no SM time from it; nccl after it. auto: the copy engines where
  // every rank can map the others' memory, else NCCL (said at start-up).
  Zero1Transport zero1_transport = Zero1Transport::Auto;
  double allreduce_bucket_mb = 25.0;  // gradient all-reduce bucket size, launched during backward
  // The all-reduce's wire format (issue 20). bf16 halves the traffic: each bucket is rounded to
  // bf16, summed over ranks in bf16 and widened back into the fp32 gradient arena, so the sum
  // carries bf16 rounding (a relative 2^-9 per element and per addition). ZeRO-1's reduce-scatter
  // goes in it too (over the copy engines: the other ranks' parts arrive rounded, the own stays fp32).
  GradReduceDType grad_reduce_dtype = GradReduceDType::FP32;
  double dist_timeout_s = 300.0;      // a rank, NCCL op or rendezvous that takes longer ends the job
  std::string out_dir = "runs/gpt2-small";

  int64_t head_dim() const { return d_model / n_heads; }
  // Tokens per optimizer step on one GPU: batch_size * max_seq_len * gradient_accumulation_steps.
  int64_t tokens_per_step() const { return batch_size * max_seq_len * gradient_accumulation_steps; }
};

// All valid keys, in the order the config is echoed.
const std::vector<std::string>& config_keys();

// Reads a YAML file, applies `overrides` ("key=value", the value parsed as a YAML scalar or flow
// sequence, e.g. "betas=[0.9,0.99]") in order, then checks the cross-key rules.
TrainConfig load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text; `source` names it in messages.
TrainConfig parse_config(const std::string& yaml_text, const std::string& source,
                         const std::vector<std::string>& overrides = {});
// Applies one "key=value" override (checked like a file value; cross-key rules are not rerun).
void apply_override(TrainConfig& cfg, const std::string& key_equals_value);
// Cross-key rules: n_heads divides d_model, block_size <= max_seq_len, val_data present when
// evaluations are on, vocab_size holds <|endoftext|> when document_mask is on. load_config and parse_config call it.
void validate_config(const TrainConfig& cfg);

// Checks that train_data and val_data name existing token shards with valid headers, enough
// tokens for one batch and (with check_token_ids) every id below vocab_size -- one sequential
// read of the data, about a second per GB; ranks other than 0 may skip it. The trainer calls it
// before step 0; it is separate so a config can be validated on a machine without the data.
void validate_data_paths(const TrainConfig& cfg, bool check_token_ids = true);
// The shard files one data key names (files, directories holding <split>_*.bin, or globs), sorted
// per entry. Throws ft::Error naming `key` and the entry that names nothing.
std::vector<std::string> resolve_data_paths(const std::vector<std::string>& entries, const std::string& split,
                                            const std::string& key);

// Serialisation: every key, in config_keys() order. The YAML text is flat `key: value` lines and
// parses back to an equal config; the JSON object is what state.json stores.
std::string config_to_yaml(const TrainConfig& cfg);
Json config_to_json(const TrainConfig& cfg);
// Reads the object config_to_json writes (with the same validation as a file).
TrainConfig config_from_json(const Json& j, const std::string& source = "state.json config");

bool operator==(const TrainConfig& a, const TrainConfig& b);
inline bool operator!=(const TrainConfig& a, const TrainConfig& b) { return !(a == b); }
std::ostream& operator<<(std::ostream& os, const TrainConfig& cfg);  // one-line JSON

}  // namespace ft
