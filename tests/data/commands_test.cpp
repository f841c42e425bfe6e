// The tokenize and prepare subcommands through their stream interface.
#include "data/commands.h"

#include <gtest/gtest.h>

#include <sstream>

#include "test_support.h"

namespace ft {
namespace {

struct CommandResult {
  int rc;
  std::string out, err;
};

CommandResult tokenize(const std::vector<std::string>& args, const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out, err;
  const int rc = tokenize_command(args, in, out, err);
  return {rc, out.str(), err.str()};
}

TEST(TokenizeCommand, EncodesAndDecodes) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  (void)tok;
  EXPECT_EQ(tokenize({}, "Hello world").out, "15496 995\n");
  EXPECT_EQ(tokenize({}, "").out, "\n");
  EXPECT_EQ(tokenize({"--special"}, "a<|endoftext|>").out, "64 50256\n");
  const CommandResult d = tokenize({"--decode"}, "15496 995\n198\n");
  EXPECT_EQ(d.rc, 0);
  EXPECT_EQ(d.out, "Hello world\n");
}

TEST(TokenizeCommand, BadInputGivesOneLineErrorAndNonZeroStatus) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  (void)tok;
  CommandResult r = tokenize({"--decode"}, "15496 50257");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("50257"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  r = tokenize({"--decode"}, "12 abc");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("'abc'"), std::string::npos) << r.err;
}

TEST(TokenizeCommand, UsageErrors) {
  const CommandResult r = tokenize({"--frobnicate"}, "");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("unknown argument '--frobnicate'"), std::string::npos) << r.err;
  EXPECT_EQ(tokenize({"--help"}, "").rc, 0);
  const CommandResult missing = tokenize({"--bpe-dir", "/nonexistent"}, "x");
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find("fetch_gpt2_bpe.sh"), std::string::npos) << missing.err;
}

TEST(PrepareCommand, UsageErrors) {
  std::ostringstream out, err;
  EXPECT_EQ(prepare_command({"--input", "a.txt"}, out, err), 2);
  EXPECT_NE(err.str().find("--out"), std::string::npos) << err.str();
  EXPECT_EQ(prepare_command({"--out", "d", "--val-fraction", "abc", "--corpus", "kjv"}, out, err), 2);
  EXPECT_EQ(prepare_command({"--out", "d", "--input"}, out, err), 2);
}

TEST(PrepareCommand, WritesShardsAndSummary) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  (void)tok;
  test::TempDir dir;
  test::write_bytes(dir.file("in.txt"), "one<|endoftext|>two<|endoftext|>three");
  std::ostringstream out, err;
  const int rc =
      prepare_command({"--input", dir.file("in.txt"), "--out", dir.file("o"), "--val-fraction", "0.34"}, out, err);
  ASSERT_EQ(rc, 0) << err.str();
  EXPECT_NE(err.str().find("prepared 3 documents (2 train, 1 val)"), std::string::npos) << err.str();
  EXPECT_EQ(test::list_dir(dir.file("o")), (std::vector<std::string>{"train_000000.bin", "val_000000.bin"}));
}

// The README's `prepare --input one_file.txt --val-fraction 0.1`: one document, still a val shard.
TEST(PrepareCommand, OneDocumentFileStillGetsValTokens) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  (void)tok;
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 50; ++i) text += "In the beginning God created the heaven and the earth.\n";
  test::write_bytes(dir.file("one_file.txt"), text);
  std::ostringstream out, err;
  const int rc =
      prepare_command({"--input", dir.file("one_file.txt"), "--out", dir.file("o"), "--val-fraction", "0.1"}, out, err);
  ASSERT_EQ(rc, 0) << err.str();
  EXPECT_NE(err.str().find("prepared 1 documents (too few to give val one: split by tokens instead)"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(test::list_dir(dir.file("o")), (std::vector<std::string>{"train_000000.bin", "val_000000.bin"}));
}

}  // namespace
}  // namespace ft
