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
// The event after the last device copy in or out of a pinned buffer. It lives on that copy's
// device (an event is recorded only on its own device's streams) and is waited for before the
// buffer is written, read or freed again.
struct CopyEvent {
  cudaEvent_t event = nullptr;
  int device = -1;

  // Ready for a copy on `device`: created there at first use (or when the device changes), else
  // waited for, so the buffer's previous copy has finished.
  void ready(int on) {
    if (event && device != on) {
      wait();
      CUDA_CHECK(cudaEventDestroy(event));
      event = nullptr;
    }
    if (event) {
      wait();
      return;
    }
    cuda::context(on);  // makes the device current
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    device = on;
  }
  void record(cudaStream_t stream) { CUDA_CHECK(cudaEventRecord(event, stream)); }
  void wait() const { CUDA_CHECK(cudaEventSynchronize(event)); }
  ~CopyEvent() {  // a copy still in flight finishes before its pinned buffer goes
    if (!event) return;
    (void)cudaEventSynchronize(event);
    (void)cudaEventDestroy(event);
  }
};
}  // namespace

// `pinned` before `copied`: members go in reverse order, so the event is waited for first.
struct PinnedUpload::Impl {
  Tensor pinned;  // U8 bytes, grown as needed
  CopyEvent copied;
};

struct PinnedReadback::Impl {
  Tensor pinned;  // one element of the requested dtype
  CopyEvent copied;
  bool pending = false, on_device = false;
  double cpu_value = 0;  // a CPU tensor's value, read at request()
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
  m.copied.ready(dst.device().index);  // the previous copy has read the buffer
  if (!m.pinned.defined() || m.pinned.nbytes() < n) m.pinned = Tensor::empty_pinned({static_cast<int64_t>(n)}, DType::U8);
  std::memcpy(m.pinned.data_ptr(), src, n);
  const cudaStream_t stream = stream_for(dst.device());
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), m.pinned.data_ptr(), n, cudaMemcpyHostToDevice, stream));
  m.copied.record(stream);
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
  m.copied.ready(t.device().index);  // an unread earlier request's copy has landed
  if (!m.pinned.defined() || m.pinned.dtype() != t.dtype()) m.pinned = Tensor::empty_pinned({1}, t.dtype());
  const cudaStream_t stream = stream_for(t.device());
  CUDA_CHECK(cudaMemcpyAsync(m.pinned.data_ptr(), t.data_ptr(), t.nbytes(), cudaMemcpyDeviceToHost, stream));
  m.copied.record(stream);
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
    m.copied.wait();
    return m.pinned.item();
  }
#endif
  return m.cpu_value;
}

}  // namespace ft
