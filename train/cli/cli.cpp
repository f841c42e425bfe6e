#include "train/cli/cli.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <istream>
#include <map>
#include <ostream>

#include "data/commands.h"
#include "train/cli/command_options.h"
#include "train/cli/gradients_command.h"
#include "train/config/config.h"
#include "train/dist/dist_env.h"

namespace ft {

const char* const kFlashtrainVersion = "0.1.0";

namespace {

struct CommandHelp {
  const char* name;
  const char* usage;    // after "flashtrain "
  const char* summary;  // one line for the command list
};

const std::vector<CommandHelp>& commands() {
  static const std::vector<CommandHelp> list = {
      {"train", "train CONFIG [--set key=value ...] [--resume | --init-from DIR] [--dry-run] [--nproc N]",
       "train a GPT-2 from a YAML config (configs/*.yaml)"},
      {"eval", "eval --checkpoint DIR --data PATH [--batch-size B] [--seq-len T] [--attention model|fp8]",
       "mean loss and perplexity of a checkpoint over token shards"},
      {"sample", "sample --checkpoint DIR --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--seed S] "
                 "[--attention model|fp8]",
       "generate text from a checkpoint"},
      {"compare", "compare CONFIG [--set key=value ...] [--tolerance X]",
       "train twice, flash and naive attention: report of loss, speed, memory (out_dir/compare/)"},
      {"gradients", "gradients --checkpoint DIR --data PATH --out FILE [--batch-size B] [--seq-len T]",
       "logits, loss and every parameter gradient of one batch, as safetensors (cross-checks)"},
      {"tokenize", "tokenize [--decode] [--special] [--bpe-dir DIR] [--threads N]",
       "GPT-2 BPE: text on stdin -> ids on stdout (--decode: the reverse)"},
      {"prepare", "prepare (--input PATH... | --corpus kjv) --out DIR [--val-fraction F] [--shard-tokens N]",
       "tokenise text files into train_*.bin / val_*.bin shards"},
  };
  return list;
}

struct Flag {
  const char* name;
  bool takes_value;
  bool repeatable;
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;
  bool has(const std::string& f) const { return flags.count(f) != 0; }
  const std::string& value(const std::string& f) const { return flags.at(f).back(); }
};

ParsedArgs parse_args(const std::string& command, const std::vector<std::string>& args, const std::vector<Flag>& spec) {
  ParsedArgs p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      p.positional.insert(p.positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      p.positional.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    const Flag* f = nullptr;
    for (const auto& s : spec) {
      if (name == s.name) f = &s;
    }
    if (!f) throw UsageError(command, str("unknown flag '", name, "' for '", command, "'"));
    if (!f->repeatable && p.has(name)) throw UsageError(command, str(name, " given twice"));
    std::string value;
    if (f->takes_value) {
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else {
        if (i + 1 >= args.size()) throw UsageError(command, str(name, " needs a value"));
        value = args[++i];
      }
    } else if (eq != std::string::npos) {
      throw UsageError(command, str(name, " takes no value"));
    }
    p.flags[name].push_back(value);
  }
  return p;
}

void expect_positional(const std::string& command, const ParsedArgs& p, size_t n, const char* what) {
  if (p.positional.size() < n) throw UsageError(command, str("missing ", what));
  if (p.positional.size() > n) throw UsageError(command, str("unexpected argument '", p.positional[n], "'"));
}

const std::string& required(const std::string& command, const ParsedArgs& p, const std::string& flag) {
  if (!p.has(flag)) throw UsageError(command, str(flag, " is required"));
  return p.value(flag);
}

int64_t int_flag(const std::string& command, const std::string& flag, const std::string& text, int64_t min) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < min)
    throw UsageError(command, str(flag, " expects an integer >= ", min, ", got '", text, "'"));
  return v;
}

double double_flag(const std::string& command, const std::string& flag, const std::string& text, double min) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= min) || v == HUGE_VAL)
    throw UsageError(command, str(flag, " expects a number >= ", min, ", got '", text, "'"));
  return v;
}

// --attention model|fp8: true for fp8 (ops/attention_fp8.h), false for the model's own attention.
bool attention_flag(const std::string& command, const std::string& text) {
  if (text == "fp8") return true;
  if (text == "model") return false;
  throw UsageError(command, str("--attention takes model (the model's bf16 attention) or fp8, got '", text, "'"));
}

bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
    if (a == "--") return false;
  }
  return false;
}

int train_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string cmd = "train";
  const ParsedArgs p = parse_args(cmd, args,
                                  {{"--set", true, true}, {"--resume", false, false}, {"--init-from", true, false}, {"--dry-run", false, false},
                                   {"--nproc", true, false}, {"--attention", true, false}});
  expect_positional(cmd, p, 1, "the config file (e.g. configs/gpt2-small.yaml)");
  // Accepted only to refuse it clearly: FP8 attention has no backward.
  if (p.has("--attention") && attention_flag(cmd, p.value("--attention")))
    throw UsageError(cmd, "--attention fp8 is inference only (the FP8 attention forward has no backward); "
                          "use it with eval or sample, and train with the model's bf16 attention");
  TrainOptions o;
  o.config_path = p.positional[0];
  if (p.has("--set")) o.overrides = p.flags.at("--set");
  o.resume = p.has("--resume");
  if (p.has("--init-from")) o.init_from = p.value("--init-from");
  o.dry_run = p.has("--dry-run");
  // --nproc N: N ranks on this host, one per GPU (train/dist/local_launcher.h); 1 runs in this process.
  if (p.has("--nproc")) {
    const int64_t n = int_flag(cmd, "--nproc", p.value("--nproc"), 1);
    if (n > 1024) throw UsageError(cmd, str("--nproc ", n, " is more than 1024 ranks on one host"));
    o.nproc = static_cast<int>(n);
  }
  o.args = args;
  if (o.resume && !o.init_from.empty())
    throw UsageError(cmd, "--resume and --init-from exclude each other (a resumed run takes its weights from its checkpoint)");

  // Every config error surfaces here, before the trainer starts.
  const TrainConfig cfg = load_config(o.config_path, o.overrides);
  // In a data-parallel job every rank checks the files; only rank 0 reads every token id (the scan
  // is one pass over the data, which N ranks would repeat N times).
  validate_data_paths(cfg, detect_dist_env().rank == 0);
  if (o.dry_run) {
    out << config_to_yaml(cfg);
    err << "flashtrain train: " << o.config_path << ": config and data are valid (--dry-run)\n";
    return 0;
  }
  return run_train(o, cfg, out, err);
}

int eval_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string cmd = "eval";
  const ParsedArgs p = parse_args(cmd, args, {{"--checkpoint", true, false}, {"--data", true, true},
                                              {"--batch-size", true, false}, {"--seq-len", true, false},
                                              {"--attention", true, false}});
  expect_positional(cmd, p, 0, "");
  EvalOptions o;
  if (p.has("--attention")) o.fp8_attention = attention_flag(cmd, p.value("--attention"));
  o.checkpoint = required(cmd, p, "--checkpoint");
  required(cmd, p, "--data");
  o.data = p.flags.at("--data");
  if (p.has("--batch-size")) o.batch_size = int_flag(cmd, "--batch-size", p.value("--batch-size"), 1);
  if (p.has("--seq-len")) o.seq_len = int_flag(cmd, "--seq-len", p.value("--seq-len"), 1);
  return run_eval(o, out, err);
}

int sample_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string cmd = "sample";
  const ParsedArgs p = parse_args(cmd, args, {{"--checkpoint", true, false}, {"--prompt", true, false},
                                              {"--max-new-tokens", true, false}, {"--temperature", true, false},
                                              {"--top-k", true, false}, {"--seed", true, false},
                                              {"--attention", true, false}});
  expect_positional(cmd, p, 0, "");
  SampleOptions o;
  if (p.has("--attention")) o.fp8_attention = attention_flag(cmd, p.value("--attention"));
  o.checkpoint = required(cmd, p, "--checkpoint");
  o.prompt = required(cmd, p, "--prompt");
  if (p.has("--max-new-tokens")) o.max_new_tokens = int_flag(cmd, "--max-new-tokens", p.value("--max-new-tokens"), 1);
  if (p.has("--temperature")) o.temperature = double_flag(cmd, "--temperature", p.value("--temperature"), 0.0);
  if (p.has("--top-k")) o.top_k = int_flag(cmd, "--top-k", p.value("--top-k"), 0);
  if (p.has("--seed")) o.seed = static_cast<uint64_t>(int_flag(cmd, "--seed", p.value("--seed"), 0));
  return run_sample(o, out, err);
}

int gradients_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string cmd = "gradients";
  const ParsedArgs p = parse_args(cmd, args, {{"--checkpoint", true, false}, {"--data", true, true}, {"--out", true, false},
                                              {"--batch-size", true, false}, {"--seq-len", true, false}});
  expect_positional(cmd, p, 0, "");
  GradientsOptions o;
  o.checkpoint = required(cmd, p, "--checkpoint");
  required(cmd, p, "--data");
  o.data = p.flags.at("--data");
  o.out = required(cmd, p, "--out");
  if (p.has("--batch-size")) o.batch_size = int_flag(cmd, "--batch-size", p.value("--batch-size"), 1);
  if (p.has("--seq-len")) o.seq_len = int_flag(cmd, "--seq-len", p.value("--seq-len"), 1);
  return run_gradients(o, out, err);
}

int compare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::string cmd = "compare";
  const ParsedArgs p = parse_args(cmd, args, {{"--set", true, true}, {"--tolerance", true, false}});
  expect_positional(cmd, p, 1, "the config file (e.g. configs/tiny.yaml)");
  CompareOptions o;
  o.config_path = p.positional[0];
  if (p.has("--set")) o.overrides = p.flags.at("--set");
  if (p.has("--tolerance")) o.tolerance = double_flag(cmd, "--tolerance", p.value("--tolerance"), 0.0);
  const TrainConfig cfg = load_config(o.config_path, o.overrides);
  validate_data_paths(cfg);
  return run_compare(o, cfg, out, err);
}

}  // namespace

std::string usage_of(const std::string& command) {
  for (const auto& c : commands()) {
    if (command == c.name) return str("usage: flashtrain ", c.usage);
  }
  return "usage: flashtrain <command> [args]   (flashtrain help lists the commands)";
}

std::string help_text() {
  std::string out = str("flashtrain ", kFlashtrainVersion, ": GPT-2 training in C++/CUDA\n\nusage: flashtrain <command> [args]\n\n");
  for (const auto& c : commands()) out += str("  ", c.name, std::string(10 - std::string(c.name).size(), ' '), c.summary, "\n");
  out += "  help      this text; `flashtrain help COMMAND` for a command's flags\n";
  out += "  --version the version\n\n";
  for (const auto& c : commands()) out += str("flashtrain ", c.usage, "\n");
  return out;
}

int cli_main(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  const std::string command = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.empty() ? args.end() : args.begin() + 1, args.end());
  try {
    if (command.empty()) throw UsageError("", "no command given");
    if (command == "help" || command == "--help" || command == "-h") {
      if (!rest.empty()) {
        if (usage_of(rest[0]).find("<command>") != std::string::npos) throw UsageError("", str("unknown command '", rest[0], "'"));
        out << usage_of(rest[0]) << "\n";
      } else {
        out << help_text();
      }
      return 0;
    }
    if (command == "--version") {
      out << "flashtrain " << kFlashtrainVersion << "\n";
      return 0;
    }
    // The data commands parse their own flags and report their own errors (data/commands.h).
    if (command == "tokenize") return tokenize_command(rest, in, out, err);
    if (command == "prepare") return prepare_command(rest, out, err);
    if (command == "train" || command == "eval" || command == "sample" || command == "compare" || command == "gradients") {
      if (wants_help(rest)) {
        out << usage_of(command) << "\n";
        return 0;
      }
      if (command == "train") return train_command(rest, out, err);
      if (command == "eval") return eval_command(rest, out, err);
      if (command == "sample") return sample_command(rest, out, err);
      if (command == "gradients") return gradients_command(rest, out, err);
      return compare_command(rest, out, err);
    }
    throw UsageError("", str("unknown command '", command, "'"));
  } catch (const UsageError& e) {
    err << "flashtrain: error: " << e.what() << "\n" << usage_of(e.command()) << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "flashtrain: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace ft
