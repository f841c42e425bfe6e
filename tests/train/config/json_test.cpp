// ft::Json over nlohmann/json: what our files rely on -- exact 64-bit integers, member order, the
// number forms written, and errors that name the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

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
  // Beyond 64 bits an integer reads as a double, as other readers do.
  EXPECT_EQ(Json::parse("18446744073709551616").type(), Json::Type::Double);
}

TEST(Json, DumpsCompactAndPrettyAndRoundTrips) {
  Json j = Json::object({{"step", 3}, {"lr", 1e-4}, {"name", "a\tb"}, {"list", Json::array({1, 2.5, nullptr})}});
  EXPECT_EQ(j.dump(), R"({"step":3,"lr":0.0001,"name":"a\tb","list":[1,2.5,null]})");
  EXPECT_EQ(j.dump(2),
            "{\n  \"step\": 3,\n  \"lr\": 0.0001,\n  \"name\": \"a\\tb\",\n  \"list\": [\n    1,\n    2.5,\n    null\n  ]\n}");
  EXPECT_EQ(Json::parse(j.dump()), j);
  EXPECT_EQ(Json::parse(j.dump(2)), j);
  EXPECT_EQ(Json(std::string("\x01")).dump(), "\"\\u0001\"");
  EXPECT_EQ(Json(std::string("\xC3\xA9")).dump(), "\"\xC3\xA9\"");  // UTF-8 written as it is
  EXPECT_EQ(Json(18446744073709551615ull).dump(), "18446744073709551615");
  EXPECT_THROW(Json(std::string("\xFF")).dump(), Error);  // not UTF-8: no file gets invalid JSON
}

TEST(Json, DoublesReadBackExactly) {
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(1e-8).dump(), "1e-08");
  EXPECT_EQ(Json(0.95).dump(), "0.95");
  EXPECT_EQ(Json(1.0 / 3.0).dump(), "0.3333333333333333");
  EXPECT_EQ(std::strtod(Json(1.0 / 3.0).dump().c_str(), nullptr), 1.0 / 3.0);
  for (const double v : {6e-4, 3.0e-5, 2.2250738585072014e-308, 1.7976931348623157e308, 123456.789, -7.25}) {
    EXPECT_EQ(Json::parse(Json(v).dump()).as_double(), v) << Json(v).dump();
  }
  EXPECT_EQ(Json(INFINITY).dump(), "null");  // JSON has no inf
  EXPECT_EQ(Json(NAN).dump(), "null");
}

TEST(Json, NumbersCompareByValue) {
  EXPECT_EQ(Json(32768.0), Json(32768));
  EXPECT_EQ(Json::parse(Json(32768.0).dump()), Json(32768.0));
  EXPECT_EQ(Json(1000.0).dump(), "1000.0");  // still a double when read back
  EXPECT_EQ(Json(-0.0).dump(), "-0.0");
  EXPECT_EQ(Json::parse("2.0").type(), Json::Type::Double);
  EXPECT_NE(Json(0.5), Json(0));
  EXPECT_NE(Json(1), Json(true));
  EXPECT_NE(Json(1), Json("1"));
}

TEST(Json, RejectsWhatJsonRejects) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", "tru", "\"\x01\"", "\"\\x\"",
                          "\"\\ud800\"", "{\"a\":1}x", "[1 2]", "{\"a\" 1}", "NaN", "\"\xFF\"", "// c\n1"}) {
    EXPECT_THROW(Json::parse(bad, "t"), Error) << bad;
  }
}

TEST(Json, ErrorsNameTheFile) {
  auto message = [](const std::string& text) {
    try {
      Json::parse(text, "runs/x/state.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message("{\"a\": 1, \"a\": 2}"), "runs/x/state.json: duplicate key \"a\"");
  // A syntax error: the file, then nlohmann's line, column and reason.
  const std::string syntax = message("{\"step\": 1,\n}");
  EXPECT_EQ(syntax.rfind("runs/x/state.json: parse error at line 2, column 1: syntax error", 0), 0u) << syntax;
  const std::string truncated = message("{\"step\": ");
  EXPECT_EQ(truncated.rfind("runs/x/state.json: parse error", 0), 0u) << truncated;
  EXPECT_NE(truncated.find("end of input"), std::string::npos) << truncated;
  // Bounded nesting: Json's destructor recurses, so hostile input must not reach the stack's end.
  EXPECT_EQ(message(std::string(300, '[')), "runs/x/state.json: nesting deeper than 256 levels");
  EXPECT_NO_THROW(Json::parse(std::string(200, '[') + std::string(200, ']')));
}

}  // namespace
}  // namespace ft
