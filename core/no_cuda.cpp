// Built instead of core/cuda/* when FT_CUDA is off: every CUDA entry point says so plainly.
#include "core/allocator.h"
#include "core/cuda/copy.h"
#include "core/device.h"
#include "core/error.h"

namespace ft {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(str("[", what, "] flashtrain was built without CUDA (configure with -DFT_CUDA=ON)"));
}

class NoCudaAllocator final : public Allocator {
 public:
  void* allocate(size_t) override { no_cuda("allocator"); }
  void deallocate(void*, size_t) override {}
  MemoryStats stats() const override { return {}; }
  void reset_peak() override {}
};
}  // namespace

int cuda_device_count() { return 0; }
Stream stream_for(Device d) {
  FT_CHECK_ARG(d.is_cuda(), "[stream_for] ", d, " has no stream");
  no_cuda("stream_for");
}
void synchronize(Device d) {
  if (d.is_cuda()) no_cuda("synchronize");
}
Allocator& cuda_allocator(int) { no_cuda("cuda_allocator"); }
Allocator& pinned_allocator() {
  static NoCudaAllocator a;
  return a;
}

namespace cuda {
void strided_copy(const StridedCopyParams&, Stream) { no_cuda("copy"); }
void fill(void*, int64_t, DType, double, Stream) { no_cuda("fill"); }
void copy_bytes(void*, const void*, size_t, bool, bool, Stream) { no_cuda("copy"); }
}  // namespace cuda

}  // namespace ft
