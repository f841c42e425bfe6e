// prepare against the reference encoder's ids: documents are fixture texts, so the expected shard
// contents are [50256] + reference ids per document, split by the documented val rule.
#include "data/prepare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "data/error.h"
#include "data/kjv.h"
#include "data/shard.h"
#include "test_support.h"

namespace ft {
namespace {

std::vector<int32_t> read_shards(const std::vector<std::string>& paths) {
  std::vector<int32_t> out;
  for (const auto& p : paths) {
    ShardReader r(p);
    r.check_tokens();
    out.insert(out.end(), r.tokens(), r.tokens() + r.size());
  }
  return out;
}

TEST(Prepare, ShardsHoldReferenceIdsSplitEveryNthDocument) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  (void)tok;
  std::vector<test::TokenizerCase> docs;
  for (auto& c : test::load_tokenizer_cases()) {
    // Blank texts (only ASCII whitespace) are no documents for prepare; leave them out here.
    const bool blank = c.text.find_first_not_of(" \t\r\n") == std::string::npos;
    if (!blank && c.text.find("<|endoftext|>") == std::string::npos) docs.push_back(c);
  }
  ASSERT_GE(docs.size(), 20u);
  test::TempDir dir;
  // Two input files; the first holds docs[0..9] separated by <|endoftext|>, the second the rest.
  std::string a, b;
  for (size_t i = 0; i < docs.size(); ++i) {
    std::string& f = i < 10 ? a : b;
    if (!f.empty()) f += "<|endoftext|>";
    f += docs[i].text;
  }
  test::write_bytes(dir.file("a.txt"), a);
  test::write_bytes(dir.file("b.txt"), b + "<|endoftext|>\n");  // a trailing separator adds no document
  PrepareOptions opt;
  opt.inputs = {dir.file("a.txt"), dir.file("b.txt")};
  opt.out_dir = dir.file("out/nested");
  opt.val_fraction = 0.25;  // documents 3, 7, 11, ... go to val
  opt.shard_tokens = 500;   // several train shards
  opt.threads = 3;
  opt.progress = false;
  const PrepareSummary s = prepare_corpus(opt, nullptr);

  std::vector<int32_t> train, val;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto& dst = i % 4 == 3 ? val : train;
    dst.push_back(50256);
    dst.insert(dst.end(), docs[i].ids.begin(), docs[i].ids.end());
  }
  std::vector<std::string> train_files, val_files;
  for (const auto& n : test::list_dir(opt.out_dir))
    (n.rfind("train_", 0) == 0 ? train_files : val_files).push_back(opt.out_dir + "/" + n);
  EXPECT_EQ(s.documents, docs.size());
  EXPECT_EQ(s.val_documents, docs.size() / 4);
  ASSERT_GE(train_files.size(), 2u);
  EXPECT_EQ(train_files[0], opt.out_dir + "/train_000000.bin");
  EXPECT_EQ(val_files[0], opt.out_dir + "/val_000000.bin");
  EXPECT_EQ(read_shards(train_files), train);
  EXPECT_EQ(read_shards(val_files), val);
  EXPECT_EQ(s.train_tokens, train.size());
  for (size_t k = 0; k + 1 < train_files.size(); ++k) EXPECT_EQ(ShardReader(train_files[k]).size(), 500u);

  // A second preparation into the same directory replaces the first completely.
  opt.shard_tokens = 100000;
  prepare_corpus(opt, nullptr);
  EXPECT_EQ(test::list_dir(opt.out_dir), (std::vector<std::string>{"train_000000.bin", "val_000000.bin"}));
  EXPECT_EQ(read_shards({opt.out_dir + "/train_000000.bin"}), train);
}

// A single text file without separators is one document: by the document rule val would get
// none, and training with such data failed. The token stream is cut instead.
TEST(Prepare, TooFewDocumentsSplitTheTokenStream) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  std::string text;
  for (const auto& c : test::load_tokenizer_cases()) {
    if (c.text.find("<|endoftext|>") == std::string::npos) text += c.text + "\n";
  }
  test::TempDir dir;
  test::write_bytes(dir.file("one.txt"), text);
  PrepareOptions opt;
  opt.inputs = {dir.file("one.txt")};
  opt.out_dir = dir.file("out");
  opt.val_fraction = 0.1;
  opt.shard_tokens = 300;  // the cut lands inside a shard, with shards on both sides
  opt.threads = 2;
  opt.progress = false;
  std::ostringstream log;
  const PrepareSummary s = prepare_corpus(opt, &log);

  std::vector<int32_t> all = {50256};
  const std::vector<int32_t> ids = tok->encode(text);
  all.insert(all.end(), ids.begin(), ids.end());
  const size_t n_val = all.size() / 10;  // floor(0.1 x tokens)
  ASSERT_GT(n_val, 300u);
  const auto cut = all.end() - static_cast<std::ptrdiff_t>(n_val);
  const std::vector<int32_t> train(all.begin(), cut), val(cut, all.end());
  std::vector<std::string> train_files, val_files;
  for (const auto& n : test::list_dir(opt.out_dir))
    (n.rfind("train_", 0) == 0 ? train_files : val_files).push_back(opt.out_dir + "/" + n);
  EXPECT_EQ(read_shards(train_files), train);
  EXPECT_EQ(read_shards(val_files), val);
  EXPECT_TRUE(s.split_by_tokens);
  EXPECT_EQ(s.documents, 1u);
  EXPECT_EQ(s.train_documents, 1u);  // the one document is on both sides of the cut
  EXPECT_EQ(s.val_documents, 1u);
  EXPECT_EQ(s.train_tokens, train.size());
  EXPECT_EQ(s.val_tokens, n_val);
  EXPECT_NE(log.str().find("prepared 1 documents (too few to give val one: split by tokens instead), " +
                           std::to_string(train.size()) + " train + " + std::to_string(n_val) + " val tokens"),
            std::string::npos)
      << log.str();

  // Three documents at 0.25 still give val none by documents (floor(0.75) = 0): the cut runs
  // through the stream of all three, here inside the last.
  test::write_bytes(dir.file("three.txt"), "one<|endoftext|>two<|endoftext|>" + text);
  opt.inputs = {dir.file("three.txt")};
  opt.val_fraction = 0.25;
  const PrepareSummary s3 = prepare_corpus(opt, nullptr);
  std::vector<int32_t> stream = {50256};
  for (const char* doc : {"one", "two"}) {
    const auto d = tok->encode(doc);
    stream.insert(stream.end(), d.begin(), d.end());
    stream.push_back(50256);
  }
  stream.insert(stream.end(), ids.begin(), ids.end());
  const auto cut3 = stream.end() - static_cast<std::ptrdiff_t>(stream.size() / 4);
  train_files.clear();
  val_files.clear();
  for (const auto& n : test::list_dir(opt.out_dir))
    (n.rfind("train_", 0) == 0 ? train_files : val_files).push_back(opt.out_dir + "/" + n);
  EXPECT_EQ(read_shards(train_files), std::vector<int32_t>(stream.begin(), cut3));
  EXPECT_EQ(read_shards(val_files), std::vector<int32_t>(cut3, stream.end()));
  EXPECT_TRUE(s3.split_by_tokens);
  EXPECT_EQ(s3.train_documents, 3u);
  EXPECT_EQ(s3.val_documents, 1u);

  // Four documents at 0.25 give val one, and the document rule applies.
  test::write_bytes(dir.file("four.txt"), "one<|endoftext|>two<|endoftext|>three<|endoftext|>" + text);
  opt.inputs = {dir.file("four.txt")};
  const PrepareSummary s4 = prepare_corpus(opt, nullptr);
  EXPECT_FALSE(s4.split_by_tokens);
  EXPECT_EQ(s4.val_documents, 1u);
  EXPECT_EQ(s4.val_tokens, ids.size() + 1);  // document 3, the last
}

TEST(Prepare, FailureLeavesTheOutputDirectoryUntouched) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  (void)tok;
  test::TempDir dir;
  test::write_bytes(dir.file("ok.txt"), "hello world");
  const std::string out = dir.file("out");
  PrepareOptions opt;
  opt.inputs = {dir.file("ok.txt")};
  opt.out_dir = out;
  opt.progress = false;
  opt.val_fraction = 0;
  prepare_corpus(opt, nullptr);
  const auto before = test::list_dir(out);
  opt.inputs.push_back(dir.file("missing.txt"));
  try {
    prepare_corpus(opt, nullptr);
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing.txt")), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::list_dir(out), before);
  test::write_bytes(dir.file("empty.txt"), "");
  opt.inputs = {dir.file("empty.txt")};
  EXPECT_THROW(prepare_corpus(opt, nullptr), DataError);
  EXPECT_EQ(test::list_dir(out), before);
}

TEST(Prepare, RejectsBadOptions) {
  PrepareOptions opt;
  opt.inputs = {"x"};
  EXPECT_THROW(prepare_corpus(opt, nullptr), DataError);  // no --out
  opt.out_dir = "/tmp/x";
  opt.val_fraction = 1.0;
  EXPECT_THROW(prepare_corpus(opt, nullptr), DataError);
  opt.val_fraction = 0.1;
  opt.corpus = "shakespeare";
  EXPECT_THROW(prepare_corpus(opt, nullptr), DataError);
}

TEST(Kjv, ParsesChaptersAsDocuments) {
  const auto docs = parse_kjv(
      "Ge1:1 In the beginning God created the heaven and the earth.\n"
      "Ge1:2 And the earth was without form.\n"
      "Ge2:1 Thus the heavens and the earth were finished.\n"
      "1Sm1:1 Now there was a certain man.\n",
      "sample");
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].reference, "Ge1");
  EXPECT_EQ(docs[0].text, "In the beginning God created the heaven and the earth.\nAnd the earth was without form.\n");
  EXPECT_EQ(docs[2].reference, "1Sm1");
  EXPECT_EQ(docs[2].text, "Now there was a certain man.\n");
  EXPECT_THROW(parse_kjv("Genesis 1\n", "sample"), DataError);
  EXPECT_THROW(parse_kjv("", "sample"), DataError);
}

TEST(Kjv, MissingProgramSaysHowToInstall) {
  try {
    load_kjv("flashtrain-no-such-bible-program");
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("apt-get install bible-kjv"), std::string::npos) << e.what();
  }
}

TEST(Kjv, WholeBibleHasTheKnownShape) {
  if (std::system("command -v bible >/dev/null 2>&1") != 0) GTEST_SKIP() << "bible-kjv not installed";
  const auto docs = load_kjv();
  EXPECT_EQ(docs.size(), 1189u);  // chapters of the Protestant canon
  size_t verses = 0;
  for (const auto& d : docs) verses += static_cast<size_t>(std::count(d.text.begin(), d.text.end(), '\n'));
  EXPECT_EQ(verses, 31102u);
  EXPECT_EQ(docs.front().text.substr(0, 55), "In the beginning God created the heaven and the earth.\n");
  EXPECT_EQ(docs.back().reference, "Rev22");
}

}  // namespace
}  // namespace ft
