// GPT-2's reversible byte <-> unicode mapping (bytes_to_unicode in openai/gpt-2 encoder.py).
//
// encoder.json and vocab.bpe spell every token as a string of "visible" code points, one per byte:
// printable Latin-1 bytes stand for themselves and the other 68 bytes are shifted to U+0100..U+0143
// (so a space is written 'Ġ' = U+0120). The tokenizer itself works on raw bytes; this mapping is
// only used to translate the two vocabulary files when they are loaded.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ft {

// Code point that stands for byte b in the vocabulary files.
uint32_t byte_to_unicode(uint8_t b);

// Inverse of byte_to_unicode; nullopt for a code point that stands for no byte.
std::optional<uint8_t> unicode_to_byte(uint32_t cp);

// Appends the UTF-8 encoding of cp (cp <= 0x10FFFF) to out.
void append_utf8(uint32_t cp, std::string& out);

// Translates a vocabulary-file spelling (valid UTF-8 of mapped code points) back to raw bytes;
// nullopt when it is not valid UTF-8 or contains a code point outside the mapping.
std::optional<std::string> vocab_spelling_to_bytes(std::string_view spelling);

}  // namespace ft
