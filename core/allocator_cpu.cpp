#include <cstdlib>
#include <mutex>
#include <new>

#include "core/allocator.h"
#include "core/error.h"

namespace ft {
namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t n = ((nbytes + 63) / 64) * 64;
    void* p = n ? std::aligned_alloc(64, n) : nullptr;
    FT_CHECK_ARG(p || n == 0, "[cpu_allocator] out of host memory allocating ", nbytes, " bytes");
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated_bytes += n;
    stats_.reserved_bytes = stats_.allocated_bytes;
    stats_.device_allocs++;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    std::free(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated_bytes -= ((nbytes + 63) / 64) * 64;
    stats_.reserved_bytes = stats_.allocated_bytes;
  }
  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

 private:
  mutable std::mutex mu_;
  MemoryStats stats_;
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator* a = new CpuAllocator();  // never destroyed: tensors may outlive statics
  return *a;
}

Allocator& allocator_for(Device d) {
  return d.is_cpu() ? cpu_allocator() : cuda_allocator(d.index);
}

}  // namespace ft
