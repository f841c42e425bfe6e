// Batches of token windows from a set of shards (data/shard.h), for training.
//
// Window layout. A window is T+1 consecutive tokens of one shard; window k of a shard with N tokens
// starts at token k*T, for k = 0 .. (N-1)/T - 1 (integer division), so consecutive windows share
// one token and every token but the last of a shard is a prediction target exactly once per epoch.
// Windows never cross shard boundaries. A batch is B windows stacked row-major:
//
//   tokens: int32, shape (B, T+1), row b = one window
//   inputs  = tokens[:, 0:T]     (row b, column t at tokens[b*(T+1) + t])
//   targets = tokens[:, 1:T+1]   (the next token of each input: tokens[b*(T+1) + t + 1])
//
// Order. Epoch e visits every window once: in file order (shard order as given, then k), or, with
// shuffle, in a permutation that is a function of (seed, e) only (splitmix64-driven Fisher-Yates,
// identical on every platform). Global step s of an epoch takes the slots [s*B*W, (s+1)*B*W) of the
// order, W = world_size; rank r gets [s*B*W + r*B, s*B*W + (r+1)*B) -- disjoint across ranks, and
// together the ranks see what a single process with batch B*W would see. The windows left over at
// the end of an epoch (fewer than B*W) are skipped; then the epoch counter advances.
//
// Position. LoaderPosition {epoch, step} names the next batch; saving it in a checkpoint and
// seek()ing to it after a restart reproduces exactly the batches the run would have seen. Its
// fingerprint (shard sizes, B, T, W, shuffle, seed) makes seek refuse a position from other data;
// seek(LoaderPosition{}) (fingerprint 0: unchecked) restarts at epoch 0, step 0, e.g. before each
// pass over a validation set.
//
// Memory. Shards are memory-mapped. With prefetch on, a background thread fills the next batch
// while the caller uses the current one (double buffering). Buffers come from a pluggable allocator
// (e.g. pinned CUDA host memory); the default is 64-byte-aligned host memory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/shard.h"

namespace ft {

// Allocates / frees the host buffers that batches are written to. The signatures match
// ft::Allocator (core/allocator.h), so pinned memory is
//   {[](size_t n) { return pinned_allocator().allocate(n); },
//    [](void* p, size_t n) { pinned_allocator().deallocate(p, n); }}
struct HostAllocator {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* p, size_t bytes)> deallocate;
  static HostAllocator aligned_host();  // 64-byte aligned, plain host memory
};

struct LoaderOptions {
  // Shard files, directories (their "<split>_*.bin" files) or glob patterns; files of each entry in
  // sorted order, entries in the order given.
  std::vector<std::string> inputs;
  std::string split = "train";  // file-name prefix used for directory inputs
  int64_t batch_size = 0;       // B, windows per rank per step
  int64_t seq_len = 0;          // T, so windows hold T+1 tokens
  bool shuffle = true;
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  int32_t vocab_size = kGpt2VocabSize;  // ids >= this are reported as corrupt data
  bool prefetch = true;
  HostAllocator allocator;  // empty = HostAllocator::aligned_host()
};

struct LoaderPosition {
  uint64_t epoch = 0;        // completed passes over the data
  uint64_t step = 0;         // global steps already taken in this epoch
  uint64_t fingerprint = 0;  // identifies data and batch geometry; 0 = unchecked

  // "epoch=E step=S fingerprint=HEX" and back; parse throws DataError on malformed text.
  std::string to_string() const;
  static LoaderPosition parse(const std::string& text);
  bool operator==(const LoaderPosition& o) const {
    return epoch == o.epoch && step == o.step && fingerprint == o.fingerprint;
  }
};

struct Batch {
  const int32_t* tokens = nullptr;  // (B, T+1), see the layout above; valid until the next next()
  int64_t B = 0, T = 0;
  LoaderPosition position;  // the position this batch was taken from
};

class Loader {
 public:
  // Opens and checks every shard (header and size). Throws DataError naming the file, or saying
  // there are too few windows for one step.
  explicit Loader(LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The batch at position(), then advances. The memory stays valid (and unmodified) until the next
  // call to next() or seek(). Rethrows a data error met by the prefetch thread (e.g. an id out of
  // range, naming the file and index).
  Batch next();

  LoaderPosition position() const { return pos_; }
  void seek(const LoaderPosition& pos);

  uint64_t windows() const { return total_windows_; }
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  const std::vector<std::string>& files() const { return paths_; }

 private:
  void fill(int32_t* dst, const LoaderPosition& pos);  // the rank's B windows at pos
  const std::vector<uint32_t>& order_for_epoch(uint64_t epoch);
  LoaderPosition advanced(LoaderPosition p) const;
  void start_fill(int buffer, const LoaderPosition& pos);
  void wait_fill();
  void worker_loop();

  LoaderOptions opt_;
  std::vector<std::string> paths_;
  std::vector<ShardReader> shards_;
  std::vector<uint64_t> first_window_;  // prefix sums: shard i holds windows [first_window_[i], first_window_[i+1])
  uint64_t total_windows_ = 0, steps_per_epoch_ = 0, fingerprint_ = 0;
  LoaderPosition pos_;

  // Permutation cache (shuffle): only touched by whichever thread is filling, never concurrently.
  uint64_t order_epoch_ = UINT64_MAX;
  std::vector<uint32_t> order_;

  size_t buffer_bytes_ = 0;
  void* buffers_[2] = {nullptr, nullptr};
  int current_ = 0;

  // Prefetch state, guarded by mutex_.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool job_pending_ = false, job_done_ = false, stop_ = false, has_inflight_ = false;
  int job_buffer_ = 0;
  LoaderPosition job_pos_;
  std::exception_ptr job_error_;
};

// Expands inputs (files, directories, globs) to a sorted, de-duplicated list of shard paths per
// entry. Throws DataError for an entry that names nothing.
std::vector<std::string> expand_shard_inputs(const std::vector<std::string>& inputs, const std::string& split);

}  // namespace ft
