#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "data/bpe_files.h"
#include "data/byte_unicode.h"
#include "data/error.h"
#include "data/json_map.h"
#include "data/mapped_file.h"
#include "data/piece_cache.h"

namespace ft {
namespace {

std::atomic<uint64_t> g_next_instance_id{1};

// Per-thread BPE memo, tied to one tokenizer instance. Cleared wholesale when it grows past the
// caps (a simple bound; what is evicted does not matter for correctness).
struct ThreadBpeState {
  static constexpr size_t kMaxEntries = 1 << 18;
  static constexpr size_t kMaxArenaBytes = 32 << 20;
  static constexpr size_t kMaxPieceBytes = 128;  // longer pieces rarely repeat; not worth keeping

  uint64_t owner = 0;
  PieceCache cache;
  std::vector<int32_t> work;  // scratch for the merge loop

  void reset_for(uint64_t id) {
    if (owner != id || cache.size() > kMaxEntries || cache.arena_bytes() > kMaxArenaBytes) {
      owner = id;
      cache.clear();
    }
  }
};

ThreadBpeState& thread_bpe_state() {
  thread_local ThreadBpeState state;
  return state;
}

// A chunk boundary at p is safe when text[p-2], text[p-1], text[p] are <printable non-space ASCII>,
// '\n', <printable non-space ASCII>. Then the whole text has a piece boundary on both sides of that
// newline: no pattern item spans a newline and a non-space, and a newline between two non-spaces
// is a piece of its own ("\s+(?!\S)" fails before the non-space, "\s+" takes it). Cut there, the
// first chunk ends in the same lone "\n" piece ("\s+(?!\S)" now matches it at the end of the
// subject), and the second starts where the whole text's next piece starts. Requiring a
// non-space before the newline matters: in "a\n\n" + "b", a cut after the second newline would
// let the first chunk end in the single piece "\n\n" instead of "\n", "\n". "<|endoftext|>" holds
// no newline, so it never straddles a cut either.
bool safe_boundary(std::string_view text, size_t p) {
  auto printable = [](char c) { return c > ' ' && c < 0x7F; };
  return p >= 2 && p < text.size() && text[p - 1] == '\n' && printable(text[p]) && printable(text[p - 2]);
}

}  // namespace

BpeTokenizer BpeTokenizer::load(const std::string& dir) {
  const BpeFiles files = find_bpe_files(dir);
  return from_files(files.encoder_json, files.vocab_bpe);
}

BpeTokenizer BpeTokenizer::from_files(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
  BpeTokenizer tok;
  tok.instance_id_ = g_next_instance_id.fetch_add(1);

  // encoder.json: spelling -> id, ids dense from 0.
  const std::string json = read_file(encoder_json_path);
  if (json.empty()) throw DataError(encoder_json_path + ": file is empty");
  const auto entries = parse_flat_json_object(json, encoder_json_path);
  std::unordered_map<std::string, int32_t> id_of;  // vocabulary-file spelling -> id
  id_of.reserve(entries.size());
  tok.token_bytes_.assign(entries.size(), std::string());
  std::vector<bool> seen(entries.size(), false);
  for (const auto& [spelling, id] : entries) {
    if (id < 0 || static_cast<size_t>(id) >= entries.size() || seen[static_cast<size_t>(id)]) {
      throw DataError(encoder_json_path + ": token ids are not 0.." + std::to_string(entries.size() - 1) +
                      " each once (bad id " + std::to_string(id) + ")");
    }
    auto bytes = vocab_spelling_to_bytes(spelling);
    if (!bytes || bytes->empty()) {
      throw DataError(encoder_json_path + ": token " + std::to_string(id) + " is not a byte-level BPE spelling");
    }
    seen[static_cast<size_t>(id)] = true;
    tok.token_bytes_[static_cast<size_t>(id)] = std::move(*bytes);
    id_of.emplace(spelling, static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    std::string spelling;
    append_utf8(byte_to_unicode(static_cast<uint8_t>(b)), spelling);
    auto it = id_of.find(spelling);
    if (it == id_of.end()) {
      throw DataError(encoder_json_path + ": no single-byte token for byte " + std::to_string(b));
    }
    tok.byte_token_[b] = it->second;
  }
  if (tok.token_bytes_.size() <= static_cast<size_t>(kEndOfText) || tok.token_bytes_[kEndOfText] != kEndOfTextText) {
    throw DataError(encoder_json_path + ": token " + std::to_string(kEndOfText) + " is not <|endoftext|>");
  }

  // vocab.bpe: a "#version" line, then one merge "left right" per line; rank = line order. As in
  // encoder.py, the first line is skipped and the line after the final newline is empty.
  const std::string bpe = read_file(vocab_bpe_path);
  if (bpe.empty()) throw DataError(vocab_bpe_path + ": file is empty");
  size_t pos = bpe.find('\n');
  if (pos == std::string::npos) throw DataError(vocab_bpe_path + ": no merges after the version line");
  ++pos;
  int32_t rank = 0;
  size_t line_no = 1;
  while (pos < bpe.size()) {
    size_t eol = bpe.find('\n', pos);
    if (eol == std::string::npos) eol = bpe.size();
    ++line_no;
    std::string_view line(bpe.data() + pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || sp == 0 || sp + 1 >= line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos) {
      throw DataError(vocab_bpe_path + ":" + std::to_string(line_no) + ": expected two tokens separated by one space");
    }
    const std::string left(line.substr(0, sp)), right(line.substr(sp + 1));
    const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    if (l == id_of.end() || r == id_of.end() || m == id_of.end()) {
      throw DataError(vocab_bpe_path + ":" + std::to_string(line_no) + ": merge '" + std::string(line) +
                      "' uses a token missing from " + encoder_json_path);
    }
    // A repeated pair keeps its first (lowest) rank, as a dict built from the list would not; GPT-2's
    // file has no repeats, so this only matters for malformed files.
    tok.merges_.emplace(pair_key(l->second, r->second), Merge{rank, m->second});
    ++rank;
  }
  if (rank == 0) throw DataError(vocab_bpe_path + ": no merges after the version line");
  return tok;
}

void BpeTokenizer::bpe_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_token_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  ThreadBpeState& st = thread_bpe_state();
  st.reset_for(instance_id_);
  const size_t h = PieceCache::hash(piece);
  uint32_t count = 0;
  if (const int32_t* ids = st.cache.find(piece, h, &count)) {
    out.insert(out.end(), ids, ids + count);
    return;
  }

  std::vector<int32_t>& word = st.work;
  word.clear();
  for (char c : piece) word.push_back(byte_token_[static_cast<uint8_t>(c)]);
  while (word.size() > 1) {
    int32_t best_rank = INT32_MAX, merged = -1, first = -1, second = -1;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = merges_.find(pair_key(word[i], word[i + 1]));
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        merged = it->second.merged;
        first = word[i];
        second = word[i + 1];
      }
    }
    if (merged < 0) break;
    size_t w = 0;
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        word[w++] = merged;
        i += 2;
      } else {
        word[w++] = word[i++];
      }
    }
    word.resize(w);
  }

  if (piece.size() <= ThreadBpeState::kMaxPieceBytes) {
    st.cache.insert(piece, h, word.data(), static_cast<uint32_t>(word.size()));
  }
  out.insert(out.end(), word.begin(), word.end());
}

void BpeTokenizer::encode_ordinary_append(std::string_view text, std::vector<int32_t>& out) const {
  pretokenizer_.split(text, [&](std::string_view piece) { bpe_piece(piece, out); });
}

void BpeTokenizer::encode_append(std::string_view text, bool allow_special, std::vector<int32_t>& out) const {
  if (!allow_special) {
    encode_ordinary_append(text, out);
    return;
  }
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(kEndOfTextText, pos);
    if (hit == std::string_view::npos) break;
    encode_ordinary_append(text.substr(pos, hit - pos), out);
    out.push_back(kEndOfText);
    pos = hit + kEndOfTextText.size();
  }
  encode_ordinary_append(text.substr(pos), out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 4 + 16);
  encode_append(text, allow_special, out);
  return out;
}

std::vector<size_t> BpeTokenizer::parallel_chunks(std::string_view text, int num_threads) {
  // About 8 chunks per thread keeps the threads busy when chunks encode at different speeds.
  const size_t target = std::max<size_t>(64 << 10, text.size() / (static_cast<size_t>(std::max(num_threads, 1)) * 8));
  std::vector<size_t> cuts{0};
  size_t pos = target;
  while (pos < text.size()) {
    const void* nl = std::memchr(text.data() + pos - 1, '\n', text.size() - (pos - 1));
    if (!nl) break;
    const size_t p = static_cast<size_t>(static_cast<const char*>(nl) - text.data()) + 1;
    if (safe_boundary(text, p)) {
      cuts.push_back(p);
      pos = p + target;
    } else {
      pos = p + 1;
    }
  }
  cuts.push_back(text.size());
  return cuts;
}

std::vector<int32_t> BpeTokenizer::encode_parallel(std::string_view text, bool allow_special, int num_threads) const {
  constexpr size_t kMinParallelBytes = 1 << 20;
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (num_threads == 1 || text.size() < kMinParallelBytes) return encode(text, allow_special);
  const std::vector<size_t> cuts = parallel_chunks(text, num_threads);
  const size_t chunks = cuts.size() - 1;
  if (chunks == 1) return encode(text, allow_special);

  std::vector<std::vector<int32_t>> parts(chunks);
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      for (size_t c; (c = next.fetch_add(1)) < chunks;) {
        parts[c] = encode(text.substr(cuts[c], cuts[c + 1] - cuts[c]), allow_special);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(chunks);
    }
  };
  std::vector<std::thread> threads;
  const size_t n_threads = std::min<size_t>(static_cast<size_t>(num_threads), chunks);
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);

  size_t total = 0;
  for (const auto& p : parts) total += p.size();
  std::vector<int32_t> out;
  out.reserve(total);
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::string BpeTokenizer::decode(const int32_t* ids, size_t n) const {
  std::string out;
  out.reserve(n * 4);
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      throw DataError("[decode] token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                      " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    }
    out += token_bytes_[static_cast<size_t>(ids[i])];
  }
  return out;
}

}  // namespace ft
