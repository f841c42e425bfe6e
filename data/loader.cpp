#include "data/loader.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "data/error.h"

namespace ft {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, n) by Lemire's multiply-shift with rejection; depends only on the generator state.
uint64_t uniform_below(uint64_t& state, uint64_t n) {
  while (true) {
    const uint64_t x = splitmix64(state);
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * n;
    const uint64_t low = static_cast<uint64_t>(m);
    if (low >= n || low >= (0 - n) % n) return static_cast<uint64_t>(m >> 64);
  }
}

uint64_t fnv1a(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xFF;
    h *= 0x100000001B3ull;
  }
  return h;
}

bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> glob_sorted(const std::string& pattern) {
  glob_t g{};
  std::vector<std::string> out;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

HostAllocator HostAllocator::aligned_host() {
  return {[](size_t bytes) -> void* {
            void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
            if (!p) throw DataError("[loader] out of host memory allocating " + std::to_string(bytes) + " bytes");
            return p;
          },
          [](void* p, size_t) { std::free(p); }};
}

std::string LoaderPosition::to_string() const {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "epoch=%llu step=%llu fingerprint=%016llx", static_cast<unsigned long long>(epoch),
                static_cast<unsigned long long>(step), static_cast<unsigned long long>(fingerprint));
  return buf;
}

LoaderPosition LoaderPosition::parse(const std::string& text) {
  unsigned long long e = 0, s = 0, f = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "epoch=%llu step=%llu fingerprint=%llx%n", &e, &s, &f, &consumed) != 3 ||
      static_cast<size_t>(consumed) != text.size()) {
    throw DataError("[loader] malformed position '" + text + "' (expected \"epoch=E step=S fingerprint=HEX\")");
  }
  return {e, s, f};
}

std::vector<std::string> expand_shard_inputs(const std::vector<std::string>& inputs, const std::string& split) {
  std::vector<std::string> out;
  for (const auto& in : inputs) {
    std::vector<std::string> found;
    if (is_directory(in)) {
      found = glob_sorted(in + "/" + split + "_*.bin");
      if (found.empty()) throw DataError(in + ": directory has no " + split + "_*.bin shards");
    } else if (in.find_first_of("*?[") != std::string::npos) {
      found = glob_sorted(in);
      if (found.empty()) throw DataError(in + ": pattern matches no shard file");
    } else {
      found.push_back(in);  // a missing file is reported by the shard reader
    }
    for (auto& f : found) {
      if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(std::move(f));
    }
  }
  if (out.empty()) throw DataError("[loader] no shard inputs given");
  return out;
}

Loader::Loader(LoaderOptions options) : opt_(std::move(options)) {
  if (opt_.batch_size <= 0 || opt_.seq_len <= 0) {
    throw DataError("[loader] batch size and sequence length must be positive (B=" + std::to_string(opt_.batch_size) +
                    ", T=" + std::to_string(opt_.seq_len) + ")");
  }
  if (opt_.world_size <= 0 || opt_.rank < 0 || opt_.rank >= opt_.world_size) {
    throw DataError("[loader] rank " + std::to_string(opt_.rank) +
                    " is not in [0, world_size=" + std::to_string(opt_.world_size) + ")");
  }
  if (!opt_.allocator.allocate || !opt_.allocator.deallocate) opt_.allocator = HostAllocator::aligned_host();

  paths_ = expand_shard_inputs(opt_.inputs, opt_.split);
  const uint64_t T = static_cast<uint64_t>(opt_.seq_len);
  uint64_t fp = 0xCBF29CE484222325ull;
  first_window_.push_back(0);
  for (const auto& p : paths_) {
    shards_.emplace_back(p);
    const uint64_t n = shards_.back().size();
    total_windows_ += n >= T + 1 ? (n - 1) / T : 0;
    first_window_.push_back(total_windows_);
    fp = fnv1a(fp, n);
  }
  const uint64_t per_step = static_cast<uint64_t>(opt_.batch_size) * static_cast<uint64_t>(opt_.world_size);
  if (total_windows_ > UINT32_MAX) throw DataError("[loader] more than 2^32 windows; use fewer shards per loader");
  steps_per_epoch_ = total_windows_ / per_step;
  if (steps_per_epoch_ == 0) {
    throw DataError("[loader] " + std::to_string(paths_.size()) + " shard(s) hold " + std::to_string(total_windows_) +
                    " windows of T+1=" + std::to_string(T + 1) +
                    " tokens, fewer than one step needs (B*world_size=" + std::to_string(per_step) + ")");
  }
  for (uint64_t v : {T, static_cast<uint64_t>(opt_.batch_size), static_cast<uint64_t>(opt_.world_size),
                     static_cast<uint64_t>(opt_.shuffle), opt_.seed}) {
    fp = fnv1a(fp, v);
  }
  fingerprint_ = fp == 0 ? 1 : fp;
  pos_.fingerprint = fingerprint_;

  buffer_bytes_ = static_cast<size_t>(opt_.batch_size) * (T + 1) * sizeof(int32_t);
  buffers_[0] = opt_.allocator.allocate(buffer_bytes_);
  try {
    buffers_[1] = opt_.allocator.allocate(buffer_bytes_);
  } catch (...) {
    opt_.allocator.deallocate(buffers_[0], buffer_bytes_);
    throw;
  }
  if (opt_.prefetch) worker_ = std::thread([this] { worker_loop(); });
}

Loader::~Loader() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  for (void* b : buffers_) {
    if (b) opt_.allocator.deallocate(b, buffer_bytes_);
  }
}

const std::vector<uint32_t>& Loader::order_for_epoch(uint64_t epoch) {
  if (order_epoch_ != epoch) {
    order_.resize(total_windows_);
    for (uint64_t i = 0; i < total_windows_; ++i) order_[i] = static_cast<uint32_t>(i);
    uint64_t state = opt_.seed ^ (0xD1B54A32D192ED03ull * (epoch + 1));
    for (uint64_t i = total_windows_; i > 1; --i) std::swap(order_[i - 1], order_[uniform_below(state, i)]);
    order_epoch_ = epoch;
  }
  return order_;
}

void Loader::fill(int32_t* dst, const LoaderPosition& pos) {
  const uint64_t B = static_cast<uint64_t>(opt_.batch_size), T = static_cast<uint64_t>(opt_.seq_len);
  const uint64_t base = pos.step * B * static_cast<uint64_t>(opt_.world_size) + static_cast<uint64_t>(opt_.rank) * B;
  const std::vector<uint32_t>* order = opt_.shuffle ? &order_for_epoch(pos.epoch) : nullptr;
  const auto vocab = static_cast<uint32_t>(opt_.vocab_size);
  for (uint64_t b = 0; b < B; ++b) {
    const uint64_t w = order ? (*order)[base + b] : base + b;
    const size_t s = static_cast<size_t>(std::upper_bound(first_window_.begin(), first_window_.end(), w) -
                                         first_window_.begin() - 1);
    const uint64_t start = (w - first_window_[s]) * T;
    const uint16_t* src = shards_[s].tokens() + start;
    int32_t* row = dst + b * (T + 1);
    for (uint64_t t = 0; t <= T; ++t) {
      if (src[t] >= vocab) {
        throw DataError(shards_[s].path() + ": token id " + std::to_string(src[t]) + " at index " +
                        std::to_string(start + t) + " is out of range for vocab_size " + std::to_string(vocab));
      }
      row[t] = src[t];
    }
  }
}

LoaderPosition Loader::advanced(LoaderPosition p) const {
  if (++p.step == steps_per_epoch_) {
    p.step = 0;
    ++p.epoch;
  }
  return p;
}

void Loader::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || job_pending_; });
    if (stop_) return;
    const int buffer = job_buffer_;
    const LoaderPosition pos = job_pos_;
    job_pending_ = false;
    lock.unlock();
    std::exception_ptr error;
    try {
      fill(static_cast<int32_t*>(buffers_[buffer]), pos);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    job_error_ = error;
    job_done_ = true;
    cv_.notify_all();
  }
}

void Loader::start_fill(int buffer, const LoaderPosition& pos) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_buffer_ = buffer;
    job_pos_ = pos;
    job_pending_ = true;
    job_done_ = false;
    job_error_ = nullptr;
    has_inflight_ = true;
  }
  cv_.notify_all();
}

void Loader::wait_fill() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !has_inflight_ || job_done_; });
  has_inflight_ = false;
}

Batch Loader::next() {
  Batch batch;
  batch.B = opt_.batch_size;
  batch.T = opt_.seq_len;
  batch.position = pos_;
  if (!opt_.prefetch) {
    fill(static_cast<int32_t*>(buffers_[current_]), pos_);
  } else {
    // Use the prefetched buffer if it holds pos_ (it does unless this is the first call or seek
    // moved us); otherwise fill it now.
    bool ready;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ready = has_inflight_ && job_buffer_ == current_ && job_pos_ == pos_;
    }
    if (!ready) {
      wait_fill();
      start_fill(current_, pos_);
    }
    wait_fill();
    if (job_error_) {
      std::exception_ptr e = job_error_;
      job_error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  batch.tokens = static_cast<const int32_t*>(buffers_[current_]);
  pos_ = advanced(pos_);
  current_ ^= 1;
  if (opt_.prefetch) start_fill(current_, pos_);
  return batch;
}

void Loader::seek(const LoaderPosition& pos) {
  if (pos.fingerprint != 0 && pos.fingerprint != fingerprint_) {
    throw DataError("[loader] cannot resume at " + pos.to_string() +
                    ": it was saved for other shards or batch geometry "
                    "(this loader's is " +
                    LoaderPosition{pos.epoch, pos.step, fingerprint_}.to_string() + ")");
  }
  if (pos.step >= steps_per_epoch_) {
    throw DataError("[loader] cannot resume at step " + std::to_string(pos.step) + ": an epoch has " +
                    std::to_string(steps_per_epoch_) + " steps");
  }
  if (opt_.prefetch) wait_fill();  // the prefetched batch is for the old position; discard it
  pos_ = {pos.epoch, pos.step, fingerprint_};
}

}  // namespace ft
