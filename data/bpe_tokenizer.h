// GPT-2's byte-level BPE tokenizer (vocabulary 50257; <|endoftext|> = 50256), read from the
// original encoder.json and vocab.bpe.
//
// encode: pre-tokenise (data/pretokenize.h), map each piece to its bytes' tokens, then apply the
// merges of vocab.bpe in rank order exactly as openai/gpt-2's encoder.py does: repeatedly take the
// adjacent pair of lowest rank and merge all its non-overlapping occurrences left to right. Works
// on raw bytes, so any byte string (invalid UTF-8 included) round-trips through decode.
//
// Each thread keeps a cache piece -> ids (capped in size), so repeated words cost one hash lookup.
// encode_parallel splits large inputs at positions that are always pre-token boundaries and gives
// the same ids as encode. Measured on the KJV text (bench/results/tokenizer-dev-2core.md):
// 71 MB/s on one thread (62 ms for 4.4 MB), ~35 ms of it PCRE2 pre-tokenisation. Like encoder.py
// and tiktoken, the merge loop is quadratic in the length of one piece; only pathological pieces
// (megabytes of letters without a space) make that visible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/pretokenize.h"

namespace ft {

class BpeTokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;
  static constexpr std::string_view kEndOfTextText = "<|endoftext|>";

  // Loads <dir>/encoder.json and <dir>/vocab.bpe; dir resolved as in data/bpe_files.h.
  static BpeTokenizer load(const std::string& dir = "");
  static BpeTokenizer from_files(const std::string& encoder_json_path, const std::string& vocab_bpe_path);

  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }

  // "<|endoftext|>" in the text is ordinary text unless allow_special, then it becomes kEndOfText.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false) const;
  void encode_append(std::string_view text, bool allow_special, std::vector<int32_t>& out) const;

  // Same ids as encode, computed on num_threads threads (0: all hardware threads). Inputs below
  // about 1 MiB, or without a safe split point, are encoded on the calling thread.
  std::vector<int32_t> encode_parallel(std::string_view text, bool allow_special = false, int num_threads = 0) const;
  // The chunk boundaries encode_parallel uses: 0, cuts..., text.size() (exposed for tests).
  static std::vector<size_t> parallel_chunks(std::string_view text, int num_threads);

  // Throws DataError on an id outside [0, vocab_size).
  std::string decode(const int32_t* ids, size_t n) const;
  std::string decode(const std::vector<int32_t>& ids) const { return decode(ids.data(), ids.size()); }

  // The raw bytes of a token (kEndOfText decodes to "<|endoftext|>").
  const std::string& token_bytes(int32_t id) const { return token_bytes_.at(static_cast<size_t>(id)); }

  bool jit() const { return pretokenizer_.jit(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };

  BpeTokenizer() = default;
  void encode_ordinary_append(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_piece(std::string_view piece, std::vector<int32_t>& out) const;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  uint64_t instance_id_ = 0;  // keys the per-thread cache, so two tokenizers never share entries
  Pretokenizer pretokenizer_;
  std::vector<std::string> token_bytes_;        // id -> raw bytes
  int32_t byte_token_[256] = {};                // byte -> id of its single-byte token
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank, merged id
};

}  // namespace ft
