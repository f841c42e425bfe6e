#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "data/shard.h"
#include "tests/train/train_test_util.h"
#include "train/cli/cli.h"
#include "train/config/config.h"

namespace ft {
namespace {

struct CliResult {
  int rc;
  std::string out, err;
};

CliResult run(const std::vector<std::string>& args) {
  std::istringstream in;
  std::ostringstream out, err;
  const int rc = cli_main(args, in, out, err);
  return {rc, out.str(), err.str()};
}

size_t lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// A scratch directory holding train/val shards of `tokens` tokens each and a config using them.
struct Fixture {
  test::ScratchDir dir;
  std::string config;
  explicit Fixture(size_t tokens = 4000, const std::string& extra = "") {
    std::vector<int32_t> ids(tokens);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 50257);
    write_shard(dir / "train_000000.bin", ids);
    write_shard(dir / "val_000000.bin", ids);
    config = dir / "c.yaml";
    test::write_text(config, "d_model: 64\nn_layers: 2\nn_heads: 4\nd_ff: 256\nmax_seq_len: 64\nblock_size: 64\n"
                             "batch_size: 4\ntrain_data: " + dir.path() + "\nval_data: " + dir.path() + "/val_*.bin\n"
                             "out_dir: " + dir.path() + "/run\n" + extra);
  }
};

TEST(Cli, ConfigErrorsAreOneLineAndExitOne) {
  Fixture f;
  struct Case {
    std::vector<std::string> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"n_head=4"}, "flashtrain: error: --set n_head=4: unknown key 'n_head' (did you mean 'n_heads'?); valid keys: "},
      {{"d_model=big"}, "flashtrain: error: --set d_model=big: d_model expects an integer, got 'big'"},
      {{"dropout=1"}, "flashtrain: error: --set dropout=1: dropout = 1 is out of range: must be in [0, 1)"},
      {{"n_heads=3"}, "flashtrain: error: config: n_heads = 3 must divide d_model = 64"},
      {{"mixed_precision=int8"}, "flashtrain: error: --set mixed_precision=int8: mixed_precision = int8 is not one of "},
      {{"train_data=" + f.dir / "nope_*.bin"}, "flashtrain: error: train_data: " + f.dir / "nope_*.bin" + ": pattern matches no shard file"},
      {{"val_data=" + f.dir / "missing.bin"}, "flashtrain: error: val_data: " + f.dir / "missing.bin"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"train", f.config};
    for (const auto& s : c.set) args.insert(args.end(), {"--set", s});
    const CliResult r = run(args);
    EXPECT_EQ(r.rc, 1) << c.message;
    EXPECT_EQ(r.err.rfind(c.message, 0), 0u) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const CliResult missing = run({"train", f.dir / "none.yaml"});
  EXPECT_EQ(missing.rc, 1);
  EXPECT_EQ(missing.err, "flashtrain: error: config file " + f.dir / "none.yaml" + ": cannot open: No such file or directory\n");
}

TEST(Cli, CorruptShardIsAConfigError) {
  Fixture f;
  test::write_text(f.dir / "train_000001.bin", std::string(1024, '\0'));  // bad magic
  const CliResult r = run({"train", f.config});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind("flashtrain: error: train_data: " + f.dir / "train_000001.bin", 0), 0u) << r.err;
  EXPECT_EQ(lines(r.err), 1u);
}

TEST(Cli, TokenIdsBeyondTheVocabularyAreAConfigError) {
  Fixture f;  // ids run up to 3999
  const CliResult r = run({"train", f.config, "--set", "vocab_size=1000"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind("flashtrain: error: train_data: " + f.dir / "train_000000.bin" + ": token id 1000", 0), 0u) << r.err;
  EXPECT_EQ(lines(r.err), 1u);
}

TEST(Cli, TooLittleDataForOneBatch) {
  Fixture f(100);  // one window of 65 tokens; batch_size is 4
  const CliResult r = run({"train", f.config});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "flashtrain: error: train_data: the shards hold 1 windows of max_seq_len+1 = 65 tokens, fewer than one "
                   "batch (batch_size = 4)\n");
}

TEST(Cli, ValidConfigReachesTheTrainer) {
  Fixture f;
  const CliResult r = run({"train", f.config, "--set", "lr=3e-4", "--set", "max_steps=2", "--set", "eval_interval=2",
                           "--set", "eval_steps=1", "--set", "device=cpu", "--set", "mixed_precision=fp32",
                           "--set", "gradient_accumulation_steps=1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("step 2/2 | loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 2 | val loss "), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(f.dir / "run/ckpt-2/model.safetensors"));
  const CliResult dry = run({"train", f.config, "--set=lr=3e-4", "--dry-run"});
  EXPECT_EQ(dry.rc, 0) << dry.err;
  const TrainConfig echoed = parse_config(dry.out, "echo");
  EXPECT_EQ(echoed, load_config(f.config, {"lr=3e-4"}));
  EXPECT_EQ(echoed.lr, 3e-4);
}

TEST(Cli, UsageErrorsExitTwoWithUsage) {
  Fixture f;
  const CliResult unknown = run({"frobnicate"});
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_EQ(unknown.err, "flashtrain: error: unknown command 'frobnicate'\nusage: flashtrain <command> [args]   "
                         "(flashtrain help lists the commands)\n");
  const CliResult flag = run({"train", f.config, "--resum"});
  EXPECT_EQ(flag.rc, 2);
  EXPECT_EQ(flag.err, "flashtrain: error: unknown flag '--resum' for 'train'\nusage: flashtrain train CONFIG [--set "
                      "key=value ...] [--resume | --init-from DIR] [--dry-run] [--nproc N]\n");
  EXPECT_EQ(run({"train"}).rc, 2);
  EXPECT_EQ(run({"train", f.config, "--set"}).err.rfind("flashtrain: error: --set needs a value\n", 0), 0u);
  EXPECT_EQ(run({"train", f.config, "--resume", "--init-from", "x"}).rc, 2);
  EXPECT_EQ(run({"train", f.config, "extra"}).rc, 2);
  EXPECT_EQ(run({"eval", "--data", "x"}).err.rfind("flashtrain: error: --checkpoint is required\n", 0), 0u);
  EXPECT_EQ(run({"sample", "--checkpoint", "d", "--prompt", "x", "--top-k", "-1"}).rc, 2);
  EXPECT_EQ(run({"sample", "--checkpoint", "d", "--prompt", "x", "--temperature", "hot"}).rc, 2);
  EXPECT_EQ(run({}).rc, 2);
}

TEST(Cli, HelpAndVersion) {
  for (const char* h : {"help", "--help", "-h"}) {
    const CliResult r = run({h});
    EXPECT_EQ(r.rc, 0);
    for (const char* c : {"train", "eval", "sample", "compare", "tokenize", "prepare"}) EXPECT_NE(r.out.find(c), std::string::npos);
  }
  EXPECT_EQ(run({"--version"}).out, std::string("flashtrain ") + kFlashtrainVersion + "\n");
  EXPECT_EQ(run({"train", "--help"}).out, usage_of("train") + "\n");
  EXPECT_EQ(run({"help", "eval"}).out, usage_of("eval") + "\n");
  EXPECT_EQ(run({"help", "nope"}).rc, 2);
}

TEST(Cli, EvalAndSampleParseThenLoadTheCheckpoint) {
  // The flags parse; the missing checkpoint directory is then a one-line error (exit status 1).
  const CliResult e = run({"eval", "--checkpoint", "d", "--data", "x", "--batch-size", "4", "--seq-len", "128"});
  EXPECT_EQ(e.rc, 1);
  EXPECT_EQ(e.err.rfind("flashtrain: error: d: neither state.json", 0), 0u) << e.err;
  const CliResult s = run({"sample", "--checkpoint", "d", "--prompt", "In the beginning", "--max-new-tokens", "20",
                     "--temperature", "0.8", "--top-k", "40", "--seed", "1"});
  EXPECT_EQ(s.rc, 1);
  EXPECT_EQ(lines(s.err), 1u) << s.err;
}

TEST(Cli, AttentionFp8IsForEvalAndSampleOnly) {
  Fixture f;
  // eval and sample take --attention model|fp8 (then fail on the missing checkpoint, exit 1).
  EXPECT_EQ(run({"eval", "--checkpoint", "d", "--data", "x", "--attention", "fp8"}).rc, 1);
  EXPECT_EQ(run({"sample", "--checkpoint", "d", "--prompt", "x", "--attention", "model"}).rc, 1);
  const CliResult bad = run({"eval", "--checkpoint", "d", "--data", "x", "--attention", "fp16"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--attention takes model"), std::string::npos) << bad.err;
  // train refuses fp8 by name: no backward.
  const CliResult train = run({"train", f.config, "--attention", "fp8"});
  EXPECT_EQ(train.rc, 2);
  EXPECT_NE(train.err.find("--attention fp8 is inference only"), std::string::npos) << train.err;
}

TEST(Cli, DataCommandsAreWired) {
  // The data library parses its own flags; an unknown one is its usage error, not ours.
  const CliResult r = run({"tokenize", "--no-such-flag"});
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err.find("unknown command"), std::string::npos) << r.err;
  const CliResult p = run({"prepare"});
  EXPECT_NE(p.rc, 0);
  EXPECT_EQ(p.err.find("unknown command"), std::string::npos) << p.err;
}

}  // namespace
}  // namespace ft
