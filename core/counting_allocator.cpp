#include "core/counting_allocator.h"

namespace ft {

void* CountingAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const size_t n = rounded(nbytes);
  void* p = system_allocate(n);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes += n;
  stats_.reserved_bytes = stats_.allocated_bytes;
  stats_.device_allocs++;
  if (stats_.allocated_bytes > stats_.peak_allocated_bytes) stats_.peak_allocated_bytes = stats_.allocated_bytes;
  return p;
}

void CountingAllocator::deallocate(void* ptr, size_t nbytes) {
  if (!ptr) return;
  system_free(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes -= rounded(nbytes);
  stats_.reserved_bytes = stats_.allocated_bytes;
}

MemoryStats CountingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CountingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
}

}  // namespace ft
