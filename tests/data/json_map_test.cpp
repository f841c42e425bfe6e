#include "data/json_map.h"

#include <gtest/gtest.h>

#include "data/error.h"

namespace ft {
namespace {

TEST(JsonMap, ParsesKeysWithEscapes) {
  const auto m = parse_flat_json_object(
      R"( {"!": 0, "\"": 1, "\\": 2, "\u0120the": 262, "\ud83d\ude00": 7, "a\/b\n\t": -3, "": 5} )", "t.json");
  ASSERT_EQ(m.size(), 7u);
  EXPECT_EQ(m[0], (std::pair<std::string, int64_t>("!", 0)));
  EXPECT_EQ(m[1].first, "\"");
  EXPECT_EQ(m[2].first, "\\");
  EXPECT_EQ(m[3], (std::pair<std::string, int64_t>("\xc4\xa0the", 262)));
  EXPECT_EQ(m[4].first, "\xf0\x9f\x98\x80");
  EXPECT_EQ(m[5], (std::pair<std::string, int64_t>("a/b\n\t", -3)));
  EXPECT_EQ(m[6].first, "");
  EXPECT_TRUE(parse_flat_json_object("{}", "t.json").empty());
}

TEST(JsonMap, RejectsMalformedInputNamingTheFile) {
  // Syntax errors: nlohmann's reason with the byte offset.
  for (const char* bad : {"", "{", R"({"a": 1,})", R"({"a" 1})", R"({"\ud83d": 1})", R"({"\q": 1})", R"({"a": 1} x)",
                          "{\"\xff\": 1}"}) {
    try {
      parse_flat_json_object(bad, "bad.json");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.json: invalid JSON at byte", 0), 0u) << e.what();
    }
  }
  // Valid JSON of the wrong shape: what was found, and where.
  const std::pair<const char*, const char*> wrong[] = {
      {R"({"a": 1.5})", "bad.json: expected an object of integers, found the number 1.5 at \"a\""},
      {R"({"a": "x"})", "bad.json: expected an object of integers, found a string at \"a\""},
      {R"({"a": {}})", "bad.json: expected an object of integers, found a nested object at \"a\""},
      {R"({"a": [1]})", "bad.json: expected an object of integers, found an array at \"a\""},
      {R"({"a": 9223372036854775808})", "bad.json: expected an object of integers, found an integer too large at \"a\""},
      {"[1]", "bad.json: expected an object of integers, found an array at the top level"},
      {"7", "bad.json: expected an object of integers, found a number at the top level"},
  };
  for (const auto& [text, expected] : wrong) {
    try {
      parse_flat_json_object(text, "bad.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const DataError& e) {
      EXPECT_STREQ(e.what(), expected);
    }
  }
}

}  // namespace
}  // namespace ft
