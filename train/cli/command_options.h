// What the command line hands to the commands that run a model. cli.cpp parses and checks the
// flags and the config; these functions do the work: train_command.cpp, eval_command.cpp,
// sample_command.cpp and compare_command.cpp.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace ft {

// flashtrain train CONFIG [--set key=value ...] [--resume | --init-from DIR] [--dry-run] [--nproc N]
struct TrainOptions {
  std::string config_path;
  std::vector<std::string> overrides;  // "key=value", applied in order
  bool resume = false;                 // continue from find_latest_checkpoint(out_dir)
  std::string init_from;               // HF GPT-2 directory to take the weights from
  bool dry_run = false;                // validate config and data, echo the config, stop
  int nproc = 1;                       // > 1: launch this many local ranks (train/dist/local_launcher.h)
  std::vector<std::string> args;       // the train command's arguments, for those ranks
};

// flashtrain eval --checkpoint DIR --data PATH [--batch-size B] [--seq-len T] [--attention model|fp8]
struct EvalOptions {
  std::string checkpoint;
  std::vector<std::string> data;
  int64_t batch_size = 8;
  int64_t seq_len = 0;  // 0 = the checkpoint config's max_seq_len
  bool fp8_attention = false;  // --attention fp8: the FP8 attention forward (ops/attention_fp8.h)
};

// flashtrain sample --checkpoint DIR --prompt TEXT [--max-new-tokens N] [--temperature T]
//                   [--top-k K] [--seed S] [--attention model|fp8]
struct SampleOptions {
  std::string checkpoint;
  std::string prompt;
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0 = greedy
  int64_t top_k = 0;         // 0 = no top-k filter
  uint64_t seed = 0;
  bool fp8_attention = false;  // --attention fp8: the FP8 attention forward (ops/attention_fp8.h)
};

// flashtrain compare CONFIG [--set key=value ...] [--tolerance X]   (train/report/compare.h)
struct CompareOptions {
  std::string config_path;
  std::vector<std::string> overrides;  // "key=value", applied to both runs
  double tolerance = -1;               // largest accepted relative loss difference; < 0: by precision
  // Test hook, not a flag: overrides for the naive run only, to force a difference the check must
  // catch (tests/train/compare_test.cpp).
  std::vector<std::string> naive_overrides;
};

// Each returns the process exit status and reports failures by throwing ft::Error.
// `cfg` is the loaded, validated config (data paths included).
int run_train(const TrainOptions& options, const TrainConfig& cfg, std::ostream& out, std::ostream& err);
int run_eval(const EvalOptions& options, std::ostream& out, std::ostream& err);
int run_sample(const SampleOptions& options, std::ostream& out, std::ostream& err);
// 0 when the loss curves agree within the tolerance, 1 (after writing the report) when not.
int run_compare(const CompareOptions& options, const TrainConfig& cfg, std::ostream& out, std::ostream& err);

}  // namespace ft
