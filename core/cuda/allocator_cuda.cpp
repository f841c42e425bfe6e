// The caching CUDA allocator: the only cudaMalloc/cudaFree in flashtrain.
//
// Sizes are rounded (512 B below 1 MiB, 2 MiB above) and freed blocks are kept in a size-ordered
// free list. A request takes the smallest cached block that fits, if it wastes at most 1/8 of
// the block plus one rounding unit; otherwise it calls cudaMalloc, and on out-of-memory frees
// the cache and tries once more. A training step allocates the same sizes every iteration, so
// after the first step every request is a cache hit.
//
// Private pools (core/cuda/allocator_pool.h): each block records its owner (0 = the general
// cache, else a pool id) and a freed block goes back to its owner's free list. While a pool is
// active on the calling thread, requests are served from that pool only, and a block freed then
// is adopted by the pool whatever its owner. Nothing is released to the driver while a pool is
// active (a capture may be in progress: no cudaFree, no device sync).
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/allocator_pool.h"
#include "core/counting_allocator.h"
#include "core/cuda/check.h"

namespace ft {
namespace {

using cuda::active_pool;
using cuda::PoolId;

constexpr size_t kSmallLimit = 1u << 20;
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = 2u << 20;

size_t round_size(size_t n) {
  const size_t unit = n < kSmallLimit ? kSmallRound : kLargeRound;
  return ((n + unit - 1) / unit) * unit;
}

std::string mib(size_t b) { return str(b / (1 << 20), " MiB"); }

thread_local std::vector<PoolId> t_active_pool;  // by device index

class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    const PoolId pool = active_pool(device_);
    std::lock_guard<std::mutex> lock(mu_);
    std::multimap<size_t, void*>& free = free_list(pool);
    void* p = take_cached(free, size);
    size_t block = size;
    if (p) {
      block = live_.at(p).size;  // take_cached recorded the cached block's true size
      live_[p].pool = pool;
      stats_.cache_hits++;
    } else {
      p = device_malloc(size, pool != 0);
      live_[p] = Block{size, pool};
      if (pool != 0) pools_.at(pool).reserved += size;
    }
    stats_.allocated_bytes += block;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
    return p;
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    const PoolId active = active_pool(device_);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    FT_ASSERT(it != live_.end(), "freeing a pointer this allocator does not own");
    const Block b = it->second;
    live_.erase(it);
    stats_.allocated_bytes -= b.size;
    PoolId owner = b.pool;
    if (active != 0 && owner != active) {  // a graph being captured may have used it: adopt it
      if (owner != 0) pools_.at(owner).reserved -= b.size;
      pools_.at(active).reserved += b.size;
      owner = active;
    }
    free_list(owner).emplace(b.size, ptr);
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_pool(device_) == 0) release_cache();
  }

  PoolId create_pool() {
    std::lock_guard<std::mutex> lock(mu_);
    const PoolId id = next_pool_++;
    pools_.emplace(id, Pool{});
    return id;
  }

  // The pool's cached blocks join the general cache; its live blocks will when freed.
  void release_pool(PoolId id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find(id);
    if (it == pools_.end()) return;
    for (auto& [size, p] : it->second.free) free_.emplace(size, p);
    for (auto& [p, b] : live_)
      if (b.pool == id) b.pool = 0;
    pools_.erase(it);
  }

  size_t pool_reserved(PoolId id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find(id);
    return it == pools_.end() ? 0 : it->second.reserved;
  }

  bool has_pool(PoolId id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return pools_.count(id) != 0;
  }

 private:
  struct Block {
    size_t size = 0;
    PoolId pool = 0;
  };
  struct Pool {
    std::multimap<size_t, void*> free;
    size_t reserved = 0;
  };

  std::multimap<size_t, void*>& free_list(PoolId pool) {
    if (pool == 0) return free_;
    auto it = pools_.find(pool);
    FT_ASSERT(it != pools_.end(), "cuda allocator pool ", pool, " does not exist on cuda:", device_);
    return it->second.free;
  }

  void* take_cached(std::multimap<size_t, void*>& free, size_t size) {
    auto it = free.lower_bound(size);
    if (it == free.end()) return nullptr;
    const size_t unit = size < kSmallLimit ? kSmallRound : kLargeRound;
    if (it->first > size + size / 8 + unit) return nullptr;
    void* p = it->second;
    live_[p] = Block{it->first, 0};
    free.erase(it);
    return p;
  }

  // in_pool: a pool is active (perhaps a capture): out of memory throws without emptying the
  // cache, since that would synchronise the device and cudaFree.
  void* device_malloc(size_t size, bool in_pool) {
    int prev = 0;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation && !in_pool) {
      (void)cudaGetLastError();
      release_cache();
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      CUDA_CHECK(cudaSetDevice(prev));
      throw Error(str("[cuda_allocator] out of memory on cuda:", device_, " allocating ", mib(size),
                      in_pool ? " for a CUDA graph's private pool" : "", " (in tensors ",
                      mib(stats_.allocated_bytes), ", reserved ", mib(stats_.reserved_bytes), "): ",
                      cudaGetErrorString(err)));
    }
    CUDA_CHECK(cudaSetDevice(prev));
    stats_.reserved_bytes += size;
    stats_.device_allocs++;
    return p;
  }

  // Frees the general cache's blocks (never a pool's); waits for the device first so no kernel
  // still uses them.
  void release_cache() {
    if (free_.empty()) return;
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& [size, p] : free_) {
      CUDA_CHECK(cudaFree(p));
      stats_.reserved_bytes -= size;
    }
    free_.clear();
  }

  int device_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // the general cache
  std::unordered_map<void*, Block> live_;
  std::unordered_map<PoolId, Pool> pools_;
  PoolId next_pool_ = 1;
  MemoryStats stats_;
};

class PinnedAllocator final : public CountingAllocator {
 protected:
  void* system_allocate(size_t n) override {
    void* p = nullptr;
    CUDA_CHECK(cudaHostAlloc(&p, n, cudaHostAllocDefault));
    return p;
  }
  void system_free(void* p) override { CUDA_CHECK(cudaFreeHost(p)); }
};

}  // namespace

Allocator& cuda_allocator(int index) {
  static std::mutex mu;
  static auto* allocators = new std::vector<CudaCachingAllocator*>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  FT_CHECK_ARG(index >= 0 && index < cuda_device_count(), "[cuda_allocator] device ", index,
               " requested, ", cuda_device_count(), " available");
  if (allocators->size() <= static_cast<size_t>(index)) allocators->resize(index + 1, nullptr);
  auto*& a = (*allocators)[index];
  if (!a) a = new CudaCachingAllocator(index);
  return *a;
}

namespace cuda {
namespace {
CudaCachingAllocator& caching(int device) { return static_cast<CudaCachingAllocator&>(cuda_allocator(device)); }
}  // namespace

PoolId create_pool(int device) { return caching(device).create_pool(); }

void release_pool(int device, PoolId pool) {
  FT_CHECK_ARG(active_pool(device) != pool, "[cuda_allocator] pool ", pool, " is released while active");
  caching(device).release_pool(pool);
}

size_t pool_reserved_bytes(int device, PoolId pool) { return caching(device).pool_reserved(pool); }

PoolId active_pool(int device) {
  return device >= 0 && static_cast<size_t>(device) < t_active_pool.size() ? t_active_pool[device] : 0;
}

PoolScope::PoolScope(int device, PoolId pool) : device_(device), prev_(active_pool(device)) {
  FT_CHECK_ARG(device >= 0, "[cuda_allocator] PoolScope on device ", device);
  FT_CHECK_ARG(pool == 0 || caching(device).has_pool(pool), "[cuda_allocator] pool ", pool,
               " does not exist on cuda:", device);
  if (t_active_pool.size() <= static_cast<size_t>(device)) t_active_pool.resize(device + 1, 0);
  t_active_pool[device] = pool;
}

PoolScope::~PoolScope() { t_active_pool[device_] = prev_; }

}  // namespace cuda

Allocator& pinned_allocator() {
  static auto* a = new PinnedAllocator();
  return *a;
}

}  // namespace ft
