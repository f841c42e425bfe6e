// An allocator that passes every request to the system and keeps count of the bytes in use and
// their peak (host and pinned host memory; the CUDA allocator caches and counts on its own).
#pragma once

#include <mutex>

#include "core/allocator.h"

namespace ft {

class CountingAllocator : public Allocator {
 public:
  void* allocate(size_t nbytes) final;
  void deallocate(void* ptr, size_t nbytes) final;
  MemoryStats stats() const final;
  void reset_peak() final;

 protected:
  // The size the system allocation really takes for a request of n bytes.
  virtual size_t rounded(size_t n) const { return n; }
  virtual void* system_allocate(size_t n) = 0;  // n > 0; throws on failure
  virtual void system_free(void* ptr) = 0;

 private:
  mutable std::mutex mu_;
  MemoryStats stats_;
};

}  // namespace ft
