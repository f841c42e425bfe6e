// The caching CUDA allocator: the only cudaMalloc/cudaFree in flashtrain.
//
// Sizes are rounded (512 B below 1 MiB, 2 MiB above) and freed blocks are kept in a size-ordered
// free list. A request takes the smallest cached block that fits, if it wastes at most 1/8 of
// the block plus one rounding unit; otherwise it calls cudaMalloc, and on out-of-memory frees
// the cache and tries once more. A training step allocates the same sizes every iteration, so
// after the first step every request is a cache hit.
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"
#include "core/counting_allocator.h"
#include "core/cuda/check.h"

namespace ft {
namespace {

constexpr size_t kSmallLimit = 1u << 20;
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = 2u << 20;

size_t round_size(size_t n) {
  const size_t unit = n < kSmallLimit ? kSmallRound : kLargeRound;
  return ((n + unit - 1) / unit) * unit;
}

std::string mib(size_t b) { return str(b / (1 << 20), " MiB"); }

class CudaCachingAllocator final : public Allocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = take_cached(size);
    size_t block = size;
    if (p) {
      block = live_.at(p);  // take_cached recorded the cached block's true size
      stats_.cache_hits++;
    } else {
      p = device_malloc(size);
      live_[p] = size;
    }
    stats_.allocated_bytes += block;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
    return p;
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    FT_ASSERT(it != live_.end(), "freeing a pointer this allocator does not own");
    stats_.allocated_bytes -= it->second;
    free_.emplace(it->second, ptr);
    live_.erase(it);
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
    release_cache();
  }

 private:
  void* take_cached(size_t size) {
    auto it = free_.lower_bound(size);
    if (it == free_.end()) return nullptr;
    const size_t unit = size < kSmallLimit ? kSmallRound : kLargeRound;
    if (it->first > size + size / 8 + unit) return nullptr;
    void* p = it->second;
    live_[p] = it->first;
    free_.erase(it);
    return p;
  }

  void* device_malloc(size_t size) {
    int prev = 0;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, size);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      release_cache();
      err = cudaMalloc(&p, size);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      CUDA_CHECK(cudaSetDevice(prev));
      throw Error(str("[cuda_allocator] out of memory on cuda:", device_, " allocating ", mib(size),
                      " (in tensors ", mib(stats_.allocated_bytes), ", reserved ",
                      mib(stats_.reserved_bytes), "): ", cudaGetErrorString(err)));
    }
    CUDA_CHECK(cudaSetDevice(prev));
    stats_.reserved_bytes += size;
    stats_.device_allocs++;
    return p;
  }

  // Frees cached blocks; waits for the device first so no kernel still uses them.
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
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> live_;
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

Allocator& pinned_allocator() {
  static auto* a = new PinnedAllocator();
  return *a;
}

}  // namespace ft
