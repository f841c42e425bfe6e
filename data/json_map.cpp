#include "data/json_map.h"

#include "data/byte_unicode.h"
#include "data/error.h"

namespace ft {
namespace {

class FlatJsonParser {
 public:
  FlatJsonParser(std::string_view text, const std::string& filename) : s_(text), file_(filename) {}

  std::vector<std::pair<std::string, int64_t>> parse() {
    std::vector<std::pair<std::string, int64_t>> out;
    skip_ws();
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      while (true) {
        skip_ws();
        std::string key = parse_string();
        skip_ws();
        expect(':');
        skip_ws();
        const int64_t value = parse_int();
        out.emplace_back(std::move(key), value);
        skip_ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        break;
      }
    }
    skip_ws();
    if (i_ != s_.size()) fail("trailing characters after the object");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(file_ + ": invalid JSON at byte " + std::to_string(i_) + ": " + what);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c || i_ >= s_.size()) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  uint32_t parse_hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("bad hex digit in \\u escape");
      }
    }
    return v;
  }
  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // high surrogate: a low one must follow
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') fail("unpaired surrogate");
            i_ += 2;
            const uint32_t lo = parse_hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate");
          }
          append_utf8(cp, out);
          break;
        }
        default:
          fail(std::string("unknown escape \\") + e);
      }
    }
  }
  int64_t parse_int() {
    const size_t start = i_;
    bool neg = false;
    if (peek() == '-') {
      neg = true;
      ++i_;
    }
    int64_t v = 0;
    size_t digits = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (digits > 15) fail("integer too large");
      v = v * 10 + (s_[i_++] - '0');
      ++digits;
    }
    if (digits == 0) {
      i_ = start;
      fail("expected an integer value");
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') fail("expected an integer value");
    return neg ? -v : v;
  }

  std::string_view s_;
  const std::string& file_;
  size_t i_ = 0;
};

}  // namespace

std::vector<std::pair<std::string, int64_t>> parse_flat_json_object(std::string_view text,
                                                                    const std::string& filename) {
  return FlatJsonParser(text, filename).parse();
}

}  // namespace ft
