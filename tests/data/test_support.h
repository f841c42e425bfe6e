// Helpers shared by the data tests: the GPT-2 tokenizer when its files are present, temporary
// directories, and the reference-id fixture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace ft::test {

// The tokenizer loaded from the default location, or nullptr with *why set (tests then GTEST_SKIP).
const BpeTokenizer* gpt2_tokenizer(std::string* why);

// clang-format off
#define FT_REQUIRE_GPT2_TOKENIZER(tok)                                                    \
  std::string ft_skip_reason_;                                                            \
  const ::ft::BpeTokenizer* tok = ::ft::test::gpt2_tokenizer(&ft_skip_reason_);           \
  if (!tok) GTEST_SKIP() << "GPT-2 vocabulary files absent (" << ft_skip_reason_          \
                         << "); run scripts/fetch_gpt2_bpe.sh to enable this test"
// clang-format on

// A fresh empty directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_bytes(const std::string& path, const std::string& bytes);
std::vector<std::string> list_dir(const std::string& dir);  // sorted names

struct TokenizerCase {
  std::string name;
  std::string text;  // raw UTF-8 bytes
  std::vector<int32_t> ids;
};
// Reads tests/data/fixtures/<name> (tokenizer_cases.tsv: ids from the JavaScript reference;
// tokenizer_cases_python.tsv: whitespace cases from encoder.py's algorithm with Python `regex`).
std::vector<TokenizerCase> load_tokenizer_cases(const std::string& name = "tokenizer_cases.tsv");

}  // namespace ft::test
