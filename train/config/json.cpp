#include "train/config/json.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <unordered_set>

#include "core/error.h"

namespace ft {

// ---------------------------------------------------------------- values

Json Json::array(std::vector<Json> items) {
  Json j;
  j.type_ = Type::Array;
  j.items_ = std::move(items);
  return j;
}

Json Json::object(std::vector<Member> members) {
  Json j;
  j.type_ = Type::Object;
  j.members_ = std::move(members);
  return j;
}

void Json::set_unsigned(unsigned long long v) {
  if (v <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
    type_ = Type::Int;
    int_ = static_cast<int64_t>(v);
  } else {
    type_ = Type::UInt;
    uint_ = v;
  }
}

const char* Json::type_name() const {
  switch (type_) {
    case Type::Null: return "null";
    case Type::Bool: return "a boolean";
    case Type::Int:
    case Type::UInt: return "an integer";
    case Type::Double: return "a number";
    case Type::String: return "a string";
    case Type::Array: return "an array";
    case Type::Object: return "an object";
  }
  return "?";
}

#define FT_JSON_EXPECT(cond, expected) \
  FT_CHECK_ARG(cond, "[json] expected ", expected, ", got ", type_name(), " ", dump())

bool Json::as_bool() const {
  FT_JSON_EXPECT(is_bool(), "a boolean");
  return bool_;
}

int64_t Json::as_int64() const {
  FT_JSON_EXPECT(type_ == Type::Int, "a 64-bit signed integer");
  return int_;
}

uint64_t Json::as_uint64() const {
  FT_JSON_EXPECT(type_ == Type::UInt || (type_ == Type::Int && int_ >= 0), "a non-negative integer");
  return type_ == Type::UInt ? uint_ : static_cast<uint64_t>(int_);
}

double Json::as_double() const {
  FT_JSON_EXPECT(is_number(), "a number");
  if (type_ == Type::Int) return static_cast<double>(int_);
  if (type_ == Type::UInt) return static_cast<double>(uint_);
  return double_;
}

const std::string& Json::as_string() const {
  FT_JSON_EXPECT(is_string(), "a string");
  return string_;
}

const std::vector<Json>& Json::items() const {
  FT_JSON_EXPECT(is_array(), "an array");
  return items_;
}
std::vector<Json>& Json::items() {
  FT_JSON_EXPECT(is_array(), "an array");
  return items_;
}
const std::vector<Json::Member>& Json::members() const {
  FT_JSON_EXPECT(is_object(), "an object");
  return members_;
}
std::vector<Json::Member>& Json::members() {
  FT_JSON_EXPECT(is_object(), "an object");
  return members_;
}

const Json* Json::find(const std::string& key) const {
  for (const auto& m : members()) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

const Json& Json::at(const std::string& key) const {
  const Json* j = find(key);
  FT_CHECK_ARG(j != nullptr, "[json] missing key \"", key, "\"");
  return *j;
}

Json& Json::set(const std::string& key, Json value) {
  for (auto& m : members()) {
    if (m.first == key) {
      m.second = std::move(value);
      return m.second;
    }
  }
  members_.emplace_back(key, std::move(value));
  return members_.back().second;
}

void Json::push_back(Json value) { items().push_back(std::move(value)); }

size_t Json::size() const {
  if (is_array()) return items_.size();
  if (is_object()) return members_.size();
  return 0;
}

bool Json::operator==(const Json& o) const {
  // Numbers compare by value: 32768.0 written out reads back as the integer 32768.
  if (is_number() && o.is_number() && type_ != o.type_) {
    if (is_integer() && o.is_integer()) return false;  // Int vs UInt: UInt is always > INT64_MAX
    return as_double() == o.as_double();
  }
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::Null: return true;
    case Type::Bool: return bool_ == o.bool_;
    case Type::Int: return int_ == o.int_;
    case Type::UInt: return uint_ == o.uint_;
    case Type::Double: return double_ == o.double_;
    case Type::String: return string_ == o.string_;
    case Type::Array: return items_ == o.items_;
    case Type::Object: return members_ == o.members_;
  }
  return false;
}

// ---------------------------------------------------------------- writer

std::string format_double(double v) {
  char buf[32];
  // Whole numbers print as "1000.0" (not "1e+03", and still a double when read back); below
  // 2^53 every integer is exact.
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

static void escape_string(std::string& out, const std::string& s) {
  out += '"';
  for (const unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through unchanged
        }
    }
  }
  out += '"';
}

static void newline(std::string& out, int indent, int depth) {
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

void Json::dump_to(std::string& out, int indent, int depth) const {
  switch (type_) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += bool_ ? "true" : "false"; break;
    case Type::Int: out += std::to_string(int_); break;
    case Type::UInt: out += std::to_string(uint_); break;
    case Type::Double:
      if (std::isfinite(double_)) {
        std::string s = format_double(double_);
        out += s;
      } else {
        out += "null";
      }
      break;
    case Type::String: escape_string(out, string_); break;
    case Type::Array:
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += indent < 0 ? "," : ", ";
        items_[i].dump_to(out, indent, depth + 1);
      }
      out += ']';
      break;
    case Type::Object:
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ',';
        if (indent >= 0) newline(out, indent, depth + 1);
        escape_string(out, members_[i].first);
        out += indent < 0 ? ":" : ": ";
        members_[i].second.dump_to(out, indent, depth + 1);
      }
      if (indent >= 0 && !members_.empty()) newline(out, indent, depth);
      out += '}';
      break;
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

// ---------------------------------------------------------------- reader

namespace {

// Deep enough for any file we read; shallow enough that hostile input cannot exhaust the stack.
constexpr int kMaxDepth = 256;

class Parser {
 public:
  Parser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Json parse_document() {
    skip_ws();
    Json v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(str(what_, ": ", problem, " at byte ", pos_));
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool consume(const char* word) {
    size_t n = 0;
    while (word[n]) ++n;
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  Json parse_value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    if (pos_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Json(parse_string());
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    if (consume("true")) return Json(true);
    if (consume("false")) return Json(false);
    if (consume("null")) return Json();
    fail(str("unexpected character '", c, "'"));
  }

  Json parse_object(int depth) {
    ++pos_;  // {
    Json obj = Json::object();
    std::unordered_set<std::string> seen;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      const size_t key_pos = pos_;
      std::string key = parse_string();
      if (!seen.insert(key).second) {
        pos_ = key_pos;
        fail(str("duplicate key \"", key, "\""));
      }
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
      ++pos_;
      skip_ws();
      Json value = parse_value(depth + 1);
      obj.members().emplace_back(std::move(key), std::move(value));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return obj;
      }
      fail("expected ',' or '}'");
    }
  }

  Json parse_array(int depth) {
    ++pos_;  // [
    Json arr = Json::array();
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      skip_ws();
      arr.items().push_back(parse_value(depth + 1));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return arr;
      }
      fail("expected ',' or ']'");
    }
  }

  uint32_t parse_hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("unescaped control character in string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // high surrogate: a low one must follow
            if (!consume("\\u")) fail("unpaired UTF-16 surrogate");
            const uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired UTF-16 surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired UTF-16 surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: --pos_; fail(str("bad escape '\\", e, "'"));
      }
    }
  }

  Json parse_number() {
    const size_t start = pos_;
    bool is_int = true;
    if (s_[pos_] == '-') ++pos_;
    if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("bad number");
    if (s_[pos_] == '0') {
      ++pos_;
      if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("leading zero in number");
    } else {
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_int = false;
      ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("bad number");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_int = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("bad number");
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    const std::string text = s_.substr(start, pos_ - start);
    if (is_int) {
      errno = 0;
      if (text[0] == '-') {
        const long long v = std::strtoll(text.c_str(), nullptr, 10);
        if (errno != ERANGE) return Json(v);
      } else {
        const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
        if (errno != ERANGE) return Json(v);
      }
      // Integers beyond 64 bits fall through to double, as other readers do.
    }
    return Json(std::strtod(text.c_str(), nullptr));
  }

  const std::string& s_;
  const std::string& what_;
  size_t pos_ = 0;
};

}  // namespace

Json Json::parse(const std::string& text, const std::string& what) { return Parser(text, what).parse_document(); }

}  // namespace ft
