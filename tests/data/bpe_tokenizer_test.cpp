// The tokenizer against ids from the reference JavaScript encoder (fixtures/tokenizer_cases.tsv,
// made by make_tokenizer_fixture.js), plus round trips and error messages.
#include "data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "data/error.h"
#include "test_support.h"

namespace ft {
namespace {

using test::load_tokenizer_cases;

TEST(BpeTokenizer, MatchesReferenceEncoderOnFixture) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  const auto cases = load_tokenizer_cases();
  ASSERT_GE(cases.size(), 80u);
  for (const auto& c : cases) EXPECT_EQ(tok->encode(c.text), c.ids) << "case " << c.name;
}

// U+0085, U+FEFF and U+180E, where JavaScript's and PCRE2's \s differ from Unicode White_Space,
// against GPT-2's own definition (encoder.py with Python `regex`).
TEST(BpeTokenizer, MatchesPythonReferenceOnWhitespaceEdgeCases) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  const auto cases = load_tokenizer_cases("tokenizer_cases_python.tsv");
  ASSERT_GE(cases.size(), 7u);
  for (const auto& c : cases) EXPECT_EQ(tok->encode(c.text), c.ids) << "case " << c.name;
}

TEST(BpeTokenizer, WellKnownIds) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  // Published GPT-2 ids, independent of the fixture.
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok->encode(" the"), (std::vector<int32_t>{262}));
  EXPECT_EQ(tok->encode("\n"), (std::vector<int32_t>{198}));
  EXPECT_EQ(tok->vocab_size(), 50257);
}

TEST(BpeTokenizer, DecodesReferenceIdsToText) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  for (const auto& c : load_tokenizer_cases()) EXPECT_EQ(tok->decode(c.ids), c.text) << "case " << c.name;
}

TEST(BpeTokenizer, RoundTripsArbitraryBytesIncludingInvalidUtf8) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  const std::vector<std::string> tricky = {
      std::string("\xff\xfe\xfd", 3),     std::string("abc\x80xyz", 7), std::string("\xc3", 1),  // lone lead byte
      std::string("\xed\xa0\x80", 3),                                                            // UTF-8 surrogate
      std::string("\xc0\xaf", 2),                                                                // overlong '/'
      std::string("\xf4\x90\x80\x80", 4),                                                        // > U+10FFFF
      std::string(" \xe2\x82 x\n", 6),    std::string("\0\0 a\0", 5),   std::string("it\xe2\x80\x99s\xff's", 9)};
  for (const auto& s : tricky) EXPECT_EQ(tok->decode(tok->encode(s)), s);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s(static_cast<size_t>(rng() % 300), '\0');
    for (auto& ch : s) ch = static_cast<char>(rng() & 0xFF);
    ASSERT_EQ(tok->decode(tok->encode(s)), s) << "trial " << trial;
  }
}

TEST(BpeTokenizer, ParallelEncodingEqualsSerial) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  const auto cases = load_tokenizer_cases();
  std::string text;
  std::mt19937 rng(11);
  while (text.size() < (3u << 20)) {  // above the 1 MiB parallel threshold, many chunk boundaries
    text += cases[rng() % cases.size()].text;
    const unsigned r = rng() % 4;
    text += r == 0 ? "\n" : r == 1 ? "\n\n  " : r == 2 ? " \n" : "\n<|endoftext|>";
  }
  const auto chunks = BpeTokenizer::parallel_chunks(text, 4);
  ASSERT_GT(chunks.size(), 20u);  // the test means something only if the text is really cut
  for (bool special : {false, true}) {
    const auto serial = tok->encode(text, special);
    EXPECT_EQ(tok->encode_parallel(text, special, 4), serial);
    EXPECT_EQ(tok->encode_parallel(text, special, 3), serial);
  }
}

// The whole KJV text (bible-kjv 4.38: 4,404,412 bytes) against the reference encoder: count and
// hash of its 1,169,600 ids, from tests/data/kjv_reference_hash.js. Exercises ~1.2 M pieces,
// including every verse's trailing newline, far beyond the fixture.
TEST(BpeTokenizer, WholeKjvMatchesReferenceEncoder) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  std::FILE* pipe = ::popen("bible -f Gen1:1-Rev22:21 2>/dev/null", "r");
  std::string text;
  char buf[1 << 16];
  for (size_t n; pipe && (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) text.append(buf, n);
  if (pipe) ::pclose(pipe);
  if (text.size() != 4404412) GTEST_SKIP() << "bible-kjv absent or another version (" << text.size() << " bytes)";
  const std::vector<int32_t> ids = tok->encode_parallel(text, false, 2);
  uint64_t h = 0xCBF29CE484222325ull;
  for (int32_t id : ids) {
    for (int k = 0; k < 4; ++k) {
      h ^= (static_cast<uint32_t>(id) >> (8 * k)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  EXPECT_EQ(ids.size(), 1169600u);
  EXPECT_EQ(h, 0xf6bc11b3c5cc80afull);
}

TEST(BpeTokenizer, EndOfTextOnlyWhenAllowed) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  const std::string text = "before<|endoftext|>after";
  std::vector<int32_t> expected = tok->encode("before");
  expected.push_back(50256);
  for (int32_t id : tok->encode("after")) expected.push_back(id);
  EXPECT_EQ(tok->encode(text, /*allow_special=*/true), expected);
  EXPECT_NE(tok->encode(text, false), expected);  // ordinary text: the fixture's endoftext_literal case
  EXPECT_EQ(tok->decode({50256}), "<|endoftext|>");
}

TEST(BpeTokenizer, DecodeRejectsOutOfRangeIds) {
  FT_REQUIRE_GPT2_TOKENIZER(tok);
  try {
    tok->decode({15496, 50257});
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("50257"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok->decode({-1}), DataError);
}

TEST(BpeTokenizer, MissingVocabularyNamesFileAndScript) {
  try {
    BpeTokenizer::load("/nonexistent/flashtrain-bpe");
    FAIL() << "no exception";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/nonexistent/flashtrain-bpe/encoder.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scripts/fetch_gpt2_bpe.sh"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(BpeTokenizer, CorruptVocabularyNamesFile) {
  test::TempDir dir;
  test::write_bytes(dir.file("encoder.json"), "{\"a\": 0, ");
  test::write_bytes(dir.file("vocab.bpe"), "#version: 0.2\na b\n");
  try {
    BpeTokenizer::load(dir.path());
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("encoder.json")), std::string::npos) << e.what();
  }
  test::write_bytes(dir.file("encoder.json"), "");
  EXPECT_THROW(BpeTokenizer::load(dir.path()), DataError);
}

}  // namespace
}  // namespace ft
