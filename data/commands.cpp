#include "data/commands.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "data/bpe_tokenizer.h"
#include "data/error.h"
#include "data/prepare.h"

namespace ft {
namespace {

constexpr const char* kTokenizeUsage =
    "usage: flashtrain tokenize [--decode] [--special] [--bpe-dir DIR] [--threads N]\n"
    "  reads text on stdin and prints GPT-2 token ids separated by spaces;\n"
    "  --decode reads ids and prints the text; --special maps \"<|endoftext|>\" to 50256.\n";

constexpr const char* kPrepareUsage =
    "usage: flashtrain prepare (--input PATH... | --corpus kjv) --out DIR [--val-fraction F]\n"
    "                          [--shard-tokens N] [--bpe-dir DIR] [--threads N] [--quiet]\n"
    "  tokenises text files (documents separated by <|endoftext|>) into DIR/train_*.bin and\n"
    "  DIR/val_*.bin, every 1/F-th document to val (F: 0.05), or the last F of the tokens when\n"
    "  there are too few documents; --corpus kjv uses the King James Bible from Debian's\n"
    "  bible-kjv package.\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The value after flag args[i]; advances i.
const std::string& value_of(const std::vector<std::string>& args, size_t& i) {
  if (i + 1 >= args.size()) throw UsageError(args[i] + " needs a value");
  return args[++i];
}

long long parse_integer(const std::string& flag, const std::string& v, long long lo, long long hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi) {
    throw UsageError(flag + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" +
                     v + "'");
  }
  return x;
}

double parse_double(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw UsageError(flag + " expects a number, got '" + v + "'");
  return x;
}

bool is_help(const std::string& a) { return a == "-h" || a == "--help"; }

int run_guarded(const char* command, const char* usage, std::ostream& out, std::ostream& err,
                const std::vector<std::string>& args, const std::function<void()>& body) {
  for (const auto& a : args) {
    if (is_help(a)) {
      out << usage;
      return 0;
    }
  }
  try {
    body();
    return 0;
  } catch (const UsageError& e) {
    err << "flashtrain " << command << ": " << e.what() << "\n" << usage;
    return 2;
  } catch (const std::exception& e) {
    err << "flashtrain " << command << ": " << e.what() << "\n";
    return 1;
  }
}

void tokenize_body(const std::vector<std::string>& args, std::istream& in, std::ostream& out) {
  bool decode = false, special = false;
  std::string bpe_dir;
  int threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--decode") {
      decode = true;
    } else if (args[i] == "--special") {
      special = true;
    } else if (args[i] == "--bpe-dir") {
      bpe_dir = value_of(args, i);
    } else if (args[i] == "--threads") {
      threads = static_cast<int>(parse_integer("--threads", value_of(args, i), 0, 4096));
    } else {
      throw UsageError("unknown argument '" + args[i] + "'");
    }
  }
  const BpeTokenizer tok = BpeTokenizer::load(bpe_dir);
  if (decode) {
    std::vector<int32_t> ids;
    std::string word;
    size_t index = 0;
    while (in >> word) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(word.c_str(), &end, 10);
      if (*end != '\0' || errno != 0) {
        throw DataError("[decode] input item " + std::to_string(index) + " '" + word + "' is not a token id");
      }
      if (v < 0 || v >= tok.vocab_size()) {
        throw DataError("[decode] token id " + word + " at position " + std::to_string(index) +
                        " is outside the vocabulary [0, " + std::to_string(tok.vocab_size()) + ")");
      }
      ids.push_back(static_cast<int32_t>(v));
      ++index;
    }
    const std::string text = tok.decode(ids);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    return;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int32_t> ids = tok.encode_parallel(text, special, threads);
  std::string line;
  line.reserve(ids.size() * 6 + 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line.push_back(' ');
    line += std::to_string(ids[i]);
  }
  line.push_back('\n');
  out << line << std::flush;
}

void prepare_body(const std::vector<std::string>& args, std::ostream& err) {
  PrepareOptions opt;
  bool quiet = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--input") {
      // --input takes one or more paths, up to the next flag.
      const size_t before = opt.inputs.size();
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) opt.inputs.push_back(args[++i]);
      if (opt.inputs.size() == before) throw UsageError("--input needs at least one path");
    } else if (a == "--out") {
      opt.out_dir = value_of(args, i);
    } else if (a == "--corpus") {
      opt.corpus = value_of(args, i);
    } else if (a == "--val-fraction") {
      opt.val_fraction = parse_double(a, value_of(args, i));
    } else if (a == "--shard-tokens") {
      opt.shard_tokens = static_cast<uint64_t>(parse_integer(a, value_of(args, i), 1, 0x7FFFFFFF));
    } else if (a == "--bpe-dir") {
      opt.bpe_dir = value_of(args, i);
    } else if (a == "--threads") {
      opt.threads = static_cast<int>(parse_integer(a, value_of(args, i), 0, 4096));
    } else if (a == "--quiet") {
      quiet = true;
    } else {
      throw UsageError("unknown argument '" + a + "'");
    }
  }
  if (opt.out_dir.empty()) throw UsageError("--out DIR is required");
  if (opt.inputs.empty() && opt.corpus.empty()) throw UsageError("give --input PATH... or --corpus kjv");
  if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0)) throw UsageError("--val-fraction must be in [0, 1)");
  opt.progress = !quiet;
  prepare_corpus(opt, quiet ? nullptr : &err);
}

}  // namespace

int tokenize_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  return run_guarded("tokenize", kTokenizeUsage, out, err, args, [&] { tokenize_body(args, in, out); });
}

int prepare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return run_guarded("prepare", kPrepareUsage, out, err, args, [&] { prepare_body(args, err); });
}

int tokenize_command(const std::vector<std::string>& args) {
  // Read stdin in large blocks rather than through std::cin (synchronised with stdio, it goes a
  // character at a time), then hand the bytes over as a stream.
  std::string input;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), stdin)) > 0;) input.append(buf, n);
  std::istringstream in(std::move(input));
  return tokenize_command(args, in, std::cout, std::cerr);
}

int prepare_command(const std::vector<std::string>& args) { return prepare_command(args, std::cout, std::cerr); }

}  // namespace ft
