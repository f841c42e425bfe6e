// The data subcommands of the `flashtrain` executable, as library functions. `args` are the
// arguments after the subcommand name. Each returns the process exit status: 0 on success, 1 on an
// error (one line "flashtrain <command>: <message>" on the error stream), 2 on bad usage.
//
//   flashtrain tokenize [--decode] [--special] [--bpe-dir DIR] [--threads N]
//       stdin text -> ids separated by spaces and a final newline on stdout; --special turns the
//       literal "<|endoftext|>" into 50256. --decode: whitespace-separated ids on stdin -> the exact
//       bytes on stdout (no newline added).
//   flashtrain prepare (--input PATH... | --corpus kjv) --out DIR [--val-fraction F]
//       [--shard-tokens N] [--bpe-dir DIR] [--threads N] [--quiet]
//       See data/prepare.h. `flashtrain prepare --corpus kjv --out data/kjv` is the one-liner for
//       the default dataset.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace ft {

int tokenize_command(const std::vector<std::string>& args);
int prepare_command(const std::vector<std::string>& args);

// The same with explicit streams (tests).
int tokenize_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);
int prepare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace ft
