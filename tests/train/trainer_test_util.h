// A synthetic corpus and a tiny config for the trainer tests: small enough that 50 steps take a
// second on two CPU cores, structured enough that the model visibly learns.
#pragma once

#include <string>
#include <vector>

#include "data/shard.h"
#include "train/config/config.h"
#include "train_test_util.h"

namespace ft::test {

constexpr int64_t kSynthVocab = 32;

// A learnable stream: runs of an arithmetic progression mod kSynthVocab whose stride changes
// every 16 tokens (so the next token is predictable from the previous two, but not constant).
inline std::vector<int32_t> synthetic_tokens(int64_t n, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  int32_t cur = 0, stride = 1;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 16 == 0) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      stride = 1 + static_cast<int32_t>(x % 5);
      cur = static_cast<int32_t>((x >> 8) % kSynthVocab);
    }
    ids[static_cast<size_t>(i)] = cur;
    cur = (cur + stride) % kSynthVocab;
  }
  return ids;
}

// Writes <dir>/train_000000.bin and <dir>/val_000000.bin and returns a config over them:
// 2 layers, C = 32, T = 16, B = 8, fp32 on the CPU, no eval, checkpoints only at the end.
inline TrainConfig synthetic_config(const std::string& dir) {
  write_shard(dir + "/train_000000.bin", synthetic_tokens(8192, 1));
  write_shard(dir + "/val_000000.bin", synthetic_tokens(1024, 2));
  TrainConfig c;
  c.vocab_size = kSynthVocab;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_ff = 64;
  c.max_seq_len = 16;
  c.block_size = 16;
  c.dropout = 0.0;
  c.lr = 1e-2;
  c.warmup_steps = 5;
  c.weight_decay = 0.1;
  c.gradient_accumulation_steps = 1;
  c.mixed_precision = MixedPrecision::FP32;
  c.batch_size = 8;
  c.max_steps = 50;
  c.compile_model = false;
  c.device = DeviceChoice::Cpu;
  c.seed = 7;
  c.train_data = {dir + "/train_000000.bin"};
  c.val_data = {dir + "/val_000000.bin"};
  c.eval_interval = 0;
  c.eval_steps = 4;
  c.log_interval = 10;
  c.checkpoint_interval = 0;
  c.keep_checkpoints = 0;
  c.out_dir = dir + "/run";
  return c;
}

}  // namespace ft::test
