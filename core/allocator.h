// Memory for tensors. Every device allocation in flashtrain goes through here.
//
// The CUDA allocator caches freed blocks and hands them out again without cudaFree/cudaMalloc
// (both synchronise the device). All tensor work on a device is issued on that device's single
// stream (core/device.h), so a block freed on the host can be reused by the next op at once:
// stream order guarantees the previous user's kernels finish first. Code that uses a block on
// another stream (NCCL, copy streams) must keep the tensor alive until that stream is done.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace ft {

struct MemoryStats {
  size_t allocated_bytes = 0;       // in tensors now (block sizes, after rounding)
  size_t peak_allocated_bytes = 0;  // the most ever at once since the last reset_peak
  size_t reserved_bytes = 0;        // obtained from the driver (allocated + cached)
  uint64_t device_allocs = 0;       // calls to the driver's allocator (cache misses)
  uint64_t cache_hits = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached blocks to the driver. Memory in tensors is untouched.
  virtual void empty_cache() {}
};

// 64-byte aligned host memory.
Allocator& cpu_allocator();
// Page-locked host memory, for fast asynchronous copies (falls back to throwing without CUDA).
Allocator& pinned_allocator();
// The caching allocator of CUDA device `index`.
Allocator& cuda_allocator(int index);

Allocator& allocator_for(Device d);

}  // namespace ft
