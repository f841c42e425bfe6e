#include <cstdlib>

#include "core/allocator.h"
#include "core/counting_allocator.h"
#include "core/error.h"

namespace ft {
namespace {

class CpuAllocator final : public CountingAllocator {
 protected:
  size_t rounded(size_t n) const override { return ((n + 63) / 64) * 64; }
  void* system_allocate(size_t n) override {
    void* p = std::aligned_alloc(64, n);
    FT_CHECK_ARG(p, "[cpu_allocator] out of host memory allocating ", n, " bytes");
    return p;
  }
  void system_free(void* p) override { std::free(p); }
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
