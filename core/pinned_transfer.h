// Small host <-> device transfers on a training step's critical path, through pinned buffers, so
// that neither one stalls the GPU on the host.
//
// From pageable memory, cudaMemcpyAsync to the device first waits for everything already queued
// on the stream: a batch uploaded while the optimizer's kernels were queued left the GPU idle from
// their end until the host had staged the batch and launched the next micro-step. Reading a value
// back with Tensor::item() waits for the whole stream, so work queued after it could not start
// before the host had the value and queued more. These classes keep both off the GPU's path: an
// upload returns as soon as the bytes are in its pinned buffer, and a read-back is requested (the
// copy queued) before further work and waited for only when the value is needed.
//
// Not for use inside a CUDA graph capture. CPU tensors work too (a plain copy / item()).
#pragma once

#include <memory>

#include "core/tensor.h"

namespace ft {

// Uploads host bytes into a contiguous tensor through a pinned buffer it owns. upload() copies
// `src` into the buffer and queues the device copy on dst's device stream; the source may be
// reused at once. The next upload first waits until the previous device copy has run (an event;
// normally long done), so one buffer serves every call.
class PinnedUpload {
 public:
  PinnedUpload();
  ~PinnedUpload();
  PinnedUpload(const PinnedUpload&) = delete;
  PinnedUpload& operator=(const PinnedUpload&) = delete;

  // dst: contiguous, on any device; src: dst.nbytes() bytes of host memory.
  void upload(const Tensor& dst, const void* src);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a one-element tensor back in two halves: request() queues the copy into pinned memory on
// the tensor's device stream and returns at once; value() waits for that copy alone (an event) and
// returns the element as a double. Work queued between the two keeps the GPU busy meanwhile.
class PinnedReadback {
 public:
  PinnedReadback();
  ~PinnedReadback();
  PinnedReadback(const PinnedReadback&) = delete;
  PinnedReadback& operator=(const PinnedReadback&) = delete;

  void request(const Tensor& t);  // t: one element, any device and dtype
  double value();                 // after request(); each request() is read once

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft
