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
  for (const char* bad : {"", "{", R"({"a": 1,})", R"({"a" 1})", R"({"a": 1.5})", R"({"a": "x"})", R"({"\ud83d": 1})",
                          R"({"\q": 1})", R"({"a": 1} x)", R"({"a": {}})"}) {
    try {
      parse_flat_json_object(bad, "bad.json");
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const DataError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("bad.json: invalid JSON at byte", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace ft
