#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "train/config/json.h"

namespace ft {
namespace {

TEST(Json, ParsesEveryTypeAndKeepsOrder) {
  const Json j = Json::parse(R"( {"z": 1, "a": [true, false, null], "s": "x\"\\\n\u00e9\ud83d\ude00", "d": -2.5e-3,
                                 "big": 18446744073709551615, "neg": -9223372036854775808} )");
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j.members().size(), 6u);
  EXPECT_EQ(j.members()[0].first, "z");  // insertion order, not sorted
  EXPECT_EQ(j.members()[1].first, "a");
  EXPECT_EQ(j.at("z").as_int64(), 1);
  EXPECT_TRUE(j.at("a").items()[0].as_bool());
  EXPECT_TRUE(j.at("a").items()[2].is_null());
  EXPECT_EQ(j.at("s").as_string(), "x\"\\\n\xC3\xA9\xF0\x9F\x98\x80");  // é and U+1F600 as UTF-8
  EXPECT_EQ(j.at("d").as_double(), -2.5e-3);
  EXPECT_EQ(j.at("big").as_uint64(), 18446744073709551615ull);  // exact, not via double
  EXPECT_EQ(j.at("neg").as_int64(), INT64_MIN);
  EXPECT_THROW(j.at("big").as_int64(), Error);
  EXPECT_THROW(j.at("missing"), Error);
}

TEST(Json, DumpsCompactAndPrettyAndRoundTrips) {
  Json j = Json::object({{"step", 3}, {"lr", 1e-4}, {"name", "a\tb"}, {"list", Json::array({1, 2.5, nullptr})}});
  EXPECT_EQ(j.dump(), R"({"step":3,"lr":0.0001,"name":"a\tb","list":[1,2.5,null]})");
  EXPECT_EQ(j.dump(2), "{\n  \"step\": 3,\n  \"lr\": 0.0001,\n  \"name\": \"a\\tb\",\n  \"list\": [1, 2.5, null]\n}");
  EXPECT_EQ(Json::parse(j.dump()), j);
  EXPECT_EQ(Json::parse(j.dump(2)), j);
  EXPECT_EQ(Json(std::string("\x01")).dump(), "\"\\u0001\"");
}

TEST(Json, DoublesUseTheShortestExactForm) {
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(1e-8), "1e-08");
  EXPECT_EQ(format_double(0.95), "0.95");
  EXPECT_EQ(format_double(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(std::strtod(format_double(1.0 / 3.0).c_str(), nullptr), 1.0 / 3.0);
  EXPECT_EQ(Json(INFINITY).dump(), "null");  // JSON has no inf
  EXPECT_EQ(Json(NAN).dump(), "null");
}

TEST(Json, NumbersCompareByValue) {
  EXPECT_EQ(Json(32768.0), Json(32768));
  EXPECT_EQ(Json::parse(Json(32768.0).dump()), Json(32768.0));
  EXPECT_EQ(Json(1000.0).dump(), "1000.0");
  EXPECT_EQ(Json(-0.0).dump(), "-0.0");
  EXPECT_EQ(Json::parse("2.0").type(), Json::Type::Double);
  EXPECT_NE(Json(0.5), Json(0));
  EXPECT_NE(Json(1), Json(true));
  EXPECT_NE(Json(1), Json("1"));
}

TEST(Json, RejectsWhatJsonRejects) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", "tru", "\"\x01\"", "\"\\x\"",
                          "\"\\ud800\"", "{\"a\":1}x", "[1 2]", "{\"a\" 1}", "NaN"}) {
    EXPECT_THROW(Json::parse(bad, "t"), Error) << bad;
  }
}

TEST(Json, ErrorsNameTheSourceAndOffset) {
  try {
    Json::parse("{\"a\": 1, \"a\": 2}", "state.json");
    FAIL() << "duplicate key accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "state.json: duplicate key \"a\" at byte 9");
  }
  std::string deep(300, '[');
  EXPECT_THROW(Json::parse(deep), Error);  // bounded recursion, not a stack overflow
}

}  // namespace
}  // namespace ft
