// Shards against hand-built bytes, and every bad-input message.
#include "data/shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "data/error.h"
#include "data/mapped_file.h"
#include "test_support.h"

namespace ft {
namespace {

// The llm.c layout, built by hand: header ints then little-endian uint16 tokens.
std::string shard_bytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& tokens) {
  std::string s(1024, '\0');
  const int32_t h[3] = {magic, version, count};
  std::memcpy(s.data(), h, sizeof(h));
  for (uint16_t t : tokens) {
    s.push_back(static_cast<char>(t & 0xFF));
    s.push_back(static_cast<char>(t >> 8));
  }
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Shard, WriterProducesTheLlmcLayout) {
  test::TempDir dir;
  write_shard(dir.file("a.bin"), {0, 1, 258, 50256, 65535});
  EXPECT_EQ(read_file(dir.file("a.bin")), shard_bytes(20240520, 1, 5, {0, 1, 258, 50256, 65535}));
  EXPECT_EQ(test::list_dir(dir.path()), std::vector<std::string>{"a.bin"});  // no temporary left
}

TEST(Shard, ReaderReadsHandBuiltShard) {
  test::TempDir dir;
  test::write_bytes(dir.file("s.bin"), shard_bytes(20240520, 1, 3, {7, 50256, 300}));
  ShardReader r(dir.file("s.bin"));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], 7);
  EXPECT_EQ(r[1], 50256);
  EXPECT_EQ(r[2], 300);
  EXPECT_NO_THROW(r.check_tokens());
}

TEST(Shard, UnfinishedWriterLeavesNothing) {
  test::TempDir dir;
  {
    ShardWriter w(dir.file("x.bin"));
    w.append({1, 2, 3});
  }
  EXPECT_TRUE(test::list_dir(dir.path()).empty());
  ShardWriter w(dir.file("y.bin"));
  EXPECT_THROW(w.append({70000}), DataError);
  w.abandon();
  EXPECT_TRUE(test::list_dir(dir.path()).empty());
}

TEST(Shard, LargeShardSpansWriteBuffers) {
  test::TempDir dir;
  std::vector<int32_t> ids(3'000'000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % 50257);
  write_shard(dir.file("big.bin"), ids);
  ShardReader r(dir.file("big.bin"));
  ASSERT_EQ(r.size(), ids.size());
  for (size_t i = 0; i < ids.size(); i += 99991) EXPECT_EQ(r[i], ids[i]);
  EXPECT_EQ(r[ids.size() - 1], ids.back());
}

TEST(Shard, EveryBadInputHasAOneLineMessageNamingTheFile) {
  test::TempDir dir;
  const std::string p = dir.file("bad.bin");
  struct Case {
    const char* what;
    std::string bytes;  // empty + missing=true means: do not create the file
    bool missing;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"missing", "", true, "cannot open"},
      {"empty", "", false, "empty"},
      {"short header", std::string(100, '\0'), false, "truncated"},
      {"truncated tokens", shard_bytes(20240520, 1, 4, {1, 2, 3}), false, "truncated"},
      {"trailing data", shard_bytes(20240520, 1, 2, {1, 2, 3}), false, "trailing"},
      {"wrong magic", shard_bytes(20240521, 1, 1, {1}), false, "wrong magic"},
      {"bad version", shard_bytes(20240520, 2, 1, {1}), false, "version 2"},
      {"negative count", shard_bytes(20240520, 1, -1, {}), false, "negative"},
  };
  for (const auto& c : cases) {
    std::remove(p.c_str());
    if (!c.missing) test::write_bytes(p, c.bytes);
    const std::string msg = error_of([&] { ShardReader r(p); });
    EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << c.what << ": " << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.what << ": " << msg;
  }
  test::write_bytes(p, shard_bytes(20240520, 1, 3, {5, 50257, 6}));
  ShardReader r(p);
  const std::string msg = error_of([&] { r.check_tokens(50257); });
  EXPECT_EQ(msg, p + ": token id 50257 at index 1 is out of range for vocab_size 50257");
}

}  // namespace
}  // namespace ft
