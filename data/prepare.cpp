#include "data/prepare.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iomanip>
#include <memory>
#include <mutex>
#include <sstream>
#include <string_view>
#include <thread>

#include "data/bpe_tokenizer.h"
#include "data/error.h"
#include "data/kjv.h"
#include "data/mapped_file.h"
#include "data/shard.h"

namespace ft {
namespace {

using Clock = std::chrono::steady_clock;

// Documents large enough to be worth splitting across threads on their own.
constexpr size_t kLargeDocumentBytes = 1 << 20;

// A piece of only ASCII whitespace (typically the newline after a final "<|endoftext|>") is no
// document.
bool is_blank(std::string_view doc) { return doc.find_first_not_of(" \t\r\n") == std::string_view::npos; }

bool is_val_document(uint64_t i, double f) {
  return std::floor(static_cast<double>(i + 1) * f) > std::floor(static_cast<double>(i) * f);
}

void make_directory(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw DataError(partial + ": cannot create output directory: " + std::strerror(errno));
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw DataError(dir + ": not a directory");
}

// Existing shard files of a previous preparation: train_NNNNNN.bin / val_NNNNNN.bin.
std::vector<std::string> existing_shards(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const bool prefix = name.rfind("train_", 0) == 0 || name.rfind("val_", 0) == 0;
    const bool suffix = name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0;
    if (prefix && suffix) out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  return out;
}

std::string shard_name(const std::string& dir, const char* split, size_t index) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s_%06zu.bin", split, index);
  return dir + "/" + buf;
}

// Writes one split as a sequence of shards, all left under temporary names until publish().
class SplitWriter {
 public:
  SplitWriter(std::string dir, const char* split, uint64_t shard_tokens)
      : dir_(std::move(dir)), split_(split), shard_tokens_(shard_tokens) {}

  ~SplitWriter() {
    for (const auto& t : finished_temps_) std::remove(t.c_str());
  }

  void append(const std::vector<int32_t>& ids) { append(ids.data(), ids.size()); }
  void append(const int32_t* ids, size_t n) {
    size_t i = 0;
    while (i < n) {
      if (!current_) current_ = std::make_unique<ShardWriter>(shard_name(dir_, split_, count_++), false);
      const size_t take = std::min<uint64_t>(n - i, shard_tokens_ - current_->tokens());
      current_->append(ids + i, take);
      i += take;
      if (current_->tokens() == shard_tokens_) close_current();
    }
  }

  void finish() {
    if (current_) close_current();
  }

  // Renames the finished temporaries to their final names; returns those names.
  std::vector<std::string> publish() {
    std::vector<std::string> out;
    for (size_t k = 0; k < finished_temps_.size(); ++k) {
      if (std::rename(finished_temps_[k].c_str(), finals_[k].c_str()) != 0) {
        throw DataError(finals_[k] + ": cannot rename " + finished_temps_[k] + " into place: " + std::strerror(errno));
      }
      out.push_back(finals_[k]);
    }
    finished_temps_.clear();
    return out;
  }

  bool empty() const { return finished_temps_.empty() && !current_; }

 private:
  void close_current() {
    current_->finish();
    finished_temps_.push_back(current_->temp_path());
    finals_.push_back(current_->path());
    current_.reset();
  }

  std::string dir_;
  const char* split_;
  uint64_t shard_tokens_;
  size_t count_ = 0;
  std::unique_ptr<ShardWriter> current_;
  std::vector<std::string> finished_temps_, finals_;
};

class ProgressBar {
 public:
  ProgressBar(std::ostream* out, uint64_t total)
      : out_(out), total_(std::max<uint64_t>(total, 1)), start_(Clock::now()) {}

  void update(uint64_t done, bool final_update = false) {
    if (!out_) return;
    const auto now = Clock::now();
    if (!final_update && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double frac = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::ostringstream line;
    line << "\r[prepare] [" << std::string(filled, '#') << std::string(kWidth - filled, '.') << "] " << std::setw(3)
         << static_cast<int>(frac * 100) << "% " << std::fixed << std::setprecision(1) << done / 1e6 << "/"
         << total_ / 1e6 << " MB " << (secs > 0 ? done / 1e6 / secs : 0.0) << " MB/s";
    *out_ << line.str() << (final_update ? "\n" : "") << std::flush;
  }

 private:
  std::ostream* out_;
  uint64_t total_;
  Clock::time_point start_, last_;
};

// Encodes docs[begin, end) into results (one vector per document, <|endoftext|> first).
void encode_documents(const BpeTokenizer& tok, const std::vector<std::string_view>& docs, size_t begin, size_t end,
                      int threads, std::vector<std::vector<int32_t>>& results) {
  results.assign(end - begin, {});
  std::vector<size_t> small;
  for (size_t i = begin; i < end; ++i) {
    if (docs[i].size() >= kLargeDocumentBytes) {
      results[i - begin].push_back(BpeTokenizer::kEndOfText);
      const auto ids = tok.encode_parallel(docs[i], false, threads);
      results[i - begin].insert(results[i - begin].end(), ids.begin(), ids.end());
    } else {
      small.push_back(i);
    }
  }
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      for (size_t k; (k = next.fetch_add(1)) < small.size();) {
        auto& r = results[small[k] - begin];
        r.push_back(BpeTokenizer::kEndOfText);
        tok.encode_append(docs[small[k]], false, r);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(small.size());
    }
  };
  std::vector<std::thread> pool;
  const size_t n = std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(small.size(), 1));
  for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::string format_summary(const PrepareSummary& s, const std::string& out_dir) {
  std::ostringstream o;
  o << "prepared " << s.documents << " documents (";
  if (s.split_by_tokens) {
    o << "too few to give val one: split by tokens instead";
  } else {
    o << s.train_documents << " train, " << s.val_documents << " val";
  }
  o << "), "
    << s.train_tokens << " train + " << s.val_tokens << " val tokens from " << std::fixed << std::setprecision(1)
    << s.bytes / 1e6 << " MB in " << std::setprecision(2) << s.seconds << " s (" << std::setprecision(1)
    << (s.seconds > 0 ? s.bytes / 1e6 / s.seconds : 0.0) << " MB/s overall, "
    << (s.encode_seconds > 0 ? s.bytes / 1e6 / s.encode_seconds : 0.0) << " MB/s tokenising) -> " << out_dir << ":";
  for (const auto& p : s.shards) o << " " << p.substr(p.find_last_of('/') + 1);
  return o.str();
}

PrepareSummary prepare_corpus(const PrepareOptions& opt, std::ostream* log) {
  const auto start = Clock::now();
  if (opt.out_dir.empty()) throw DataError("[prepare] no output directory (--out DIR)");
  if (opt.inputs.empty() && opt.corpus.empty()) throw DataError("[prepare] no input (--input PATH... or --corpus kjv)");
  if (!opt.corpus.empty() && opt.corpus != "kjv") {
    throw DataError("[prepare] unknown corpus '" + opt.corpus + "' (known: kjv)");
  }
  if (!(opt.val_fraction >= 0.0 && opt.val_fraction < 1.0)) {
    throw DataError("[prepare] --val-fraction must be in [0, 1), got " + std::to_string(opt.val_fraction));
  }
  if (opt.shard_tokens == 0 || opt.shard_tokens > 0x7FFFFFFFull) {
    throw DataError("[prepare] shard size must be in [1, 2^31) tokens");
  }
  const int threads =
      opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  // Load everything that can fail before writing anything.
  const BpeTokenizer tok = BpeTokenizer::load(opt.bpe_dir);
  std::vector<MappedFile> files;
  std::vector<KjvDocument> kjv;
  std::vector<std::string_view> docs;
  uint64_t total_bytes = 0;
  for (const auto& path : opt.inputs) {
    files.emplace_back(path);
    const std::string_view text(reinterpret_cast<const char*>(files.back().data()), files.back().size());
    if (text.empty()) throw DataError(path + ": input file is empty");
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t hit = text.find(BpeTokenizer::kEndOfTextText, pos);
      if (hit == std::string_view::npos) hit = text.size();
      const std::string_view doc = text.substr(pos, hit - pos);
      if (!is_blank(doc)) {
        docs.push_back(doc);
        total_bytes += doc.size();
      }
      pos = hit + BpeTokenizer::kEndOfTextText.size();
    }
  }
  if (opt.corpus == "kjv") {
    kjv = load_kjv();
    for (const auto& d : kjv) {
      docs.push_back(d.text);
      total_bytes += d.text.size();
    }
  }
  if (docs.empty()) throw DataError("[prepare] the inputs contain no documents");
  make_directory(opt.out_dir);

  PrepareSummary s;
  // Fewer documents than 1/F give val none (floor(n F) = 0, the same floor as is_val_document):
  // then the split is by tokens, the stream's last floor(F x tokens) to val. That needs the total,
  // so every document's tokens are held until the end -- in memory, 4 bytes a token, for at most
  // 1/F documents (a single document was always held whole).
  s.split_by_tokens =
      opt.val_fraction > 0 && std::floor(static_cast<double>(docs.size()) * opt.val_fraction) == 0;
  std::vector<std::vector<int32_t>> held;
  SplitWriter train(opt.out_dir, "train", opt.shard_tokens), val(opt.out_dir, "val", opt.shard_tokens);
  ProgressBar bar(opt.progress ? log : nullptr, total_bytes);
  const size_t batch_bytes = std::clamp<size_t>(total_bytes / 100, 1 << 20, 64 << 20);
  std::vector<std::vector<int32_t>> results;
  for (size_t begin = 0; begin < docs.size();) {
    size_t end = begin, bytes = 0;
    while (end < docs.size() && (end == begin || bytes < batch_bytes)) bytes += docs[end++].size();
    const auto t0 = Clock::now();
    encode_documents(tok, docs, begin, end, threads, results);
    s.encode_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    for (size_t i = begin; i < end; ++i) {
      auto& ids = results[i - begin];
      if (s.split_by_tokens) {
        held.push_back(std::move(ids));
      } else if (is_val_document(i, opt.val_fraction)) {
        val.append(ids);
        s.val_tokens += ids.size();
        ++s.val_documents;
      } else {
        train.append(ids);
        s.train_tokens += ids.size();
        ++s.train_documents;
      }
    }
    s.bytes += bytes;
    bar.update(s.bytes);
    begin = end;
  }
  bar.update(s.bytes, true);
  if (s.split_by_tokens) {
    uint64_t total = 0;
    for (const auto& ids : held) total += ids.size();
    const auto val_count = static_cast<uint64_t>(std::floor(static_cast<double>(total) * opt.val_fraction));
    const uint64_t train_count = total - val_count;
    for (const auto& ids : held) {
      // This document's tokens before the cut go to train, the rest to val.
      const size_t cut = static_cast<size_t>(std::min<uint64_t>(ids.size(), train_count - s.train_tokens));
      train.append(ids.data(), cut);
      val.append(ids.data() + cut, ids.size() - cut);
      s.train_tokens += cut;
      s.val_tokens += ids.size() - cut;
      s.train_documents += cut > 0;
      s.val_documents += cut < ids.size();
    }
  }
  train.finish();
  val.finish();
  if (train.empty()) throw DataError("[prepare] no document went to the train split");
  if (log && opt.val_fraction > 0 && val.empty()) {
    *log << "[prepare] warning: with " << s.train_tokens << " tokens and --val-fraction " << opt.val_fraction
         << " no token went to val\n";
  }

  // Publish: drop the previous preparation's shards, then move the new ones into place.
  for (const auto& old : existing_shards(opt.out_dir)) std::remove(old.c_str());
  s.shards = train.publish();
  for (auto& p : val.publish()) s.shards.push_back(std::move(p));
  s.documents = docs.size();
  s.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (log) *log << format_summary(s, opt.out_dir) << "\n";
  return s;
}

}  // namespace ft
