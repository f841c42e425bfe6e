#include "data/byte_unicode.h"

namespace ft {
namespace {

struct ByteTables {
  std::array<uint32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // mapped code points are < 256 + 68

  ByteTables() {
    to_byte.fill(-1);
    // Bytes that are printable Latin-1 keep their code point; the rest take 256, 257, ... in order.
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      to_unicode[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

uint32_t byte_to_unicode(uint8_t b) { return tables().to_unicode[b]; }

std::optional<uint8_t> unicode_to_byte(uint32_t cp) {
  if (cp >= tables().to_byte.size() || tables().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().to_byte[cp]);
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::optional<std::string> vocab_spelling_to_bytes(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size() && (static_cast<uint8_t>(s[i + 1]) & 0xC0) == 0x80) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return std::nullopt;  // every mapped code point is below U+0800
    }
    const auto b = unicode_to_byte(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace ft
