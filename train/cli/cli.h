// The `flashtrain` command line: `flashtrain <command> [args]`.
//
//   train CONFIG [--set key=value ...] [--resume | --init-from DIR] [--dry-run] [--nproc N]
//   eval --checkpoint DIR --data PATH [--batch-size B] [--seq-len T]
//   sample --checkpoint DIR --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--seed S]
//   compare CONFIG [--set key=value ...] [--tolerance X]   flash vs naive training report (train/report/compare.h)
//   tokenize ... / prepare ...             data/commands.h
//   help | --help | -h,  --version
//
// Exit status: 0 success; 1 an error (one line "flashtrain: error: <message>" on stderr);
// 2 bad usage (the error line, then the command's usage) or a command not available yet.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "core/error.h"

namespace ft {

extern const char* const kFlashtrainVersion;

// Bad command-line usage (unknown command or flag, missing value): exit status 2 with usage.
class UsageError : public Error {
 public:
  UsageError(const std::string& command, const std::string& what) : Error(what), command_(command) {}
  const std::string& command() const { return command_; }

 private:
  std::string command_;
};

// Runs one command line (the arguments after the program name). Never throws: errors become
// the message and exit status described above. tokenize reads `in`.
int cli_main(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err);

// The full help text, and one command's usage line(s).
std::string help_text();
std::string usage_of(const std::string& command);

}  // namespace ft
