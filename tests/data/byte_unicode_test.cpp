#include "data/byte_unicode.h"

#include <gtest/gtest.h>

namespace ft {
namespace {

TEST(ByteUnicode, KnownMappings) {
  // Values from GPT-2's vocabulary: ' ' is spelled 'Ġ' (U+0120), '\n' 'Ċ' (U+010A).
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);
  EXPECT_EQ(byte_to_unicode(0), 0x100u);
  EXPECT_EQ(byte_to_unicode('!'), 0x21u);
  EXPECT_EQ(byte_to_unicode(0xA1), 0xA1u);
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);  // the last non-printable byte gets the last shifted slot
  EXPECT_EQ(byte_to_unicode(0x7F), 0x121u);
}

TEST(ByteUnicode, IsABijection) {
  for (int b = 0; b < 256; ++b) {
    const auto back = unicode_to_byte(byte_to_unicode(static_cast<uint8_t>(b)));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, b);
  }
  EXPECT_FALSE(unicode_to_byte(0x20).has_value());  // a space never appears in a spelling
  EXPECT_FALSE(unicode_to_byte(0x144).has_value());
}

TEST(ByteUnicode, SpellingToBytes) {
  EXPECT_EQ(vocab_spelling_to_bytes("\xc4\xa0the"), std::optional<std::string>(" the"));  // "Ġthe"
  EXPECT_FALSE(vocab_spelling_to_bytes("a b").has_value());
  EXPECT_FALSE(vocab_spelling_to_bytes("\xe4\xbd\xa0").has_value());  // a CJK code point
}

TEST(ByteUnicode, Utf8Encoding) {
  std::string s;
  append_utf8(0x24, s);
  append_utf8(0xA2, s);
  append_utf8(0x20AC, s);
  append_utf8(0x1F600, s);
  EXPECT_EQ(s, "\x24\xc2\xa2\xe2\x82\xac\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace ft
