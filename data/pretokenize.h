// GPT-2 pre-tokenisation: splits text into the pieces that BPE then encodes one by one.
//
// The pattern is GPT-2's
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// run by PCRE2 (JIT-compiled when available) in UTF + UCP mode, so \p{L} and \p{N} are the full
// Unicode categories of PCRE2's Unicode tables. \s is spelled \p{White_Space}: PCRE2's own \s also
// matches U+180E (for Perl compatibility), which is not White_Space in current Unicode, and tiktoken
// (Rust regex) and the reference `regex` module both use White_Space.
//
// Categories come from the Unicode tables compiled into PCRE2 (10.42: Unicode 14). A code point
// assigned in a later Unicode version is unassigned (Cn) here, so it pre-tokenises as "other"
// where a newer table (node 20: Unicode 17) may call it a letter. Checked once against the
// JavaScript reference on 20,000 random strings drawn from all planes: 8 differed, each holding
// code points unassigned in Unicode 14 (CJK extensions H/J, Egyptian hieroglyphs ext. A, ...).
//
// Invalid UTF-8 is allowed (PCRE2_MATCH_INVALID_UTF): no pattern item matches an invalid sequence,
// so such bytes fall between matches; each such gap becomes a piece of its own. The pieces
// therefore always tile the input exactly, which is what makes encode/decode round-trip any bytes.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

namespace ft {

class Pretokenizer {
 public:
  Pretokenizer();
  ~Pretokenizer();
  Pretokenizer(Pretokenizer&&) noexcept;
  Pretokenizer& operator=(Pretokenizer&&) noexcept;

  // Calls fn(std::string_view piece) for each piece, in order. Thread-safe: match state is kept
  // per thread.
  template <class Fn>
  void split(std::string_view text, Fn&& fn) const {
    size_t pos = 0;
    size_t begin = 0, end = 0;
    while (pos < text.size()) {
      if (!next_match(text, pos, &begin, &end)) {
        fn(text.substr(pos));
        return;
      }
      if (begin > pos) fn(text.substr(pos, begin - pos));
      fn(text.substr(begin, end - begin));
      pos = end;
    }
  }

  bool jit() const;

 private:
  // The first match at or after `start`; false when there is none. Matches are never empty.
  bool next_match(std::string_view text, size_t start, size_t* begin, size_t* end) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft
