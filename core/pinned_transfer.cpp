#include "core/pinned_transfer.h"

#include <cstring>

#include "core/device.h"
#include "core/error.h"

#if FT_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#endif

namespace ft {

#if FT_WITH_CUDA
namespace {
// A pinned buffer's event, made ready for its next copy on `device`: created there at first use
// (an event is recorded only on its own device's streams), else waited for, so the buffer's
// previous copy has finished.
void ready_event(cudaEvent_t& e, int& on, int device) {
  if (e && on != device) {
    CUDA_CHECK(cudaEventSynchronize(e));
    CUDA_CHECK(cudaEventDestroy(e));
    e = nullptr;
  }
  if (e) {
    CUDA_CHECK(cudaEventSynchronize(e));
    return;
  }
  cuda::context(device);  // makes the device current
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  on = device;
}
}  // namespace

struct PinnedUpload::Impl {
  Tensor pinned;  // U8 bytes, grown as needed
  cudaEvent_t copied = nullptr;  // after the last device copy out of `pinned`
  int device = -1;
  ~Impl() {  // a copy still in flight finishes before its pinned buffer goes
    if (!copied) return;
    (void)cudaEventSynchronize(copied);
    (void)cudaEventDestroy(copied);
  }
};

struct PinnedReadback::Impl {
  Tensor pinned;  // one element of the requested dtype
  cudaEvent_t copied = nullptr;
  int device = -1;
  bool pending = false, on_device = false;
  double cpu_value = 0;  // a CPU tensor's value, read at request()
  ~Impl() {  // a copy still in flight finishes before its pinned buffer goes
    if (!copied) return;
    (void)cudaEventSynchronize(copied);
    (void)cudaEventDestroy(copied);
  }
};
#else
struct PinnedUpload::Impl {};
struct PinnedReadback::Impl {
  bool pending = false, on_device = false;
  double cpu_value = 0;
};
#endif

PinnedUpload::PinnedUpload() : impl_(std::make_unique<Impl>()) {}
PinnedUpload::~PinnedUpload() = default;

void PinnedUpload::upload(const Tensor& dst, const void* src) {
  FT_CHECK_ARG(dst.defined() && dst.is_contiguous(), "[PinnedUpload] the destination must be a contiguous tensor");
  const size_t n = dst.nbytes();
  if (n == 0) return;
  if (!dst.is_cuda()) {
    std::memcpy(dst.data_ptr(), src, n);
    return;
  }
#if FT_WITH_CUDA
  Impl& m = *impl_;
  ready_event(m.copied, m.device, dst.device().index);  // the previous copy has read the buffer
  if (!m.pinned.defined() || m.pinned.nbytes() < n) m.pinned = Tensor::empty_pinned({static_cast<int64_t>(n)}, DType::U8);
  std::memcpy(m.pinned.data_ptr(), src, n);
  const cudaStream_t stream = stream_for(dst.device());
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), m.pinned.data_ptr(), n, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(m.copied, stream));
#else
  FT_CHECK_ARG(false, "[PinnedUpload] a CUDA tensor in a build without CUDA");
#endif
}

PinnedReadback::PinnedReadback() : impl_(std::make_unique<Impl>()) {}
PinnedReadback::~PinnedReadback() = default;

void PinnedReadback::request(const Tensor& t) {
  FT_CHECK_ARG(t.defined() && t.numel() == 1, "[PinnedReadback] reads one element, got a tensor of shape ",
               t.defined() ? str(t.shape()) : std::string("undefined"));
  Impl& m = *impl_;
  m.pending = true;
  m.on_device = t.is_cuda();
  if (!m.on_device) {
    m.cpu_value = t.item();
    return;
  }
#if FT_WITH_CUDA
  ready_event(m.copied, m.device, t.device().index);  // an unread earlier request's copy has landed
  if (!m.pinned.defined() || m.pinned.dtype() != t.dtype()) m.pinned = Tensor::empty_pinned({1}, t.dtype());
  const cudaStream_t stream = stream_for(t.device());
  CUDA_CHECK(cudaMemcpyAsync(m.pinned.data_ptr(), t.data_ptr(), t.nbytes(), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaEventRecord(m.copied, stream));
#else
  FT_CHECK_ARG(false, "[PinnedReadback] a CUDA tensor in a build without CUDA");
#endif
}

double PinnedReadback::value() {
  Impl& m = *impl_;
  FT_CHECK_ARG(m.pending, "[PinnedReadback] value() without a request()");
  m.pending = false;
#if FT_WITH_CUDA
  if (m.on_device) {
    CUDA_CHECK(cudaEventSynchronize(m.copied));
    return m.pinned.item();
  }
#endif
  return m.cpu_value;
}

}  // namespace ft
