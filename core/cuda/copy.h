// Device-side copy and fill launchers used by core/tensor.cpp. No CUDA headers needed here.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/stream.h"

namespace ft::cuda {

constexpr int kMaxCopyDims = 8;

struct StridedCopyParams {
  void* dst = nullptr;
  const void* src = nullptr;
  int ndim = 0;
  int elem_size = 0;  // 1, 2, 4 or 8 bytes
  int64_t numel = 0;
  int64_t shape[kMaxCopyDims] = {};
  int64_t dst_strides[kMaxCopyDims] = {};  // elements
  int64_t src_strides[kMaxCopyDims] = {};
};

// dst[i] = src[i] elementwise over an N-d index space on one device.
void strided_copy(const StridedCopyParams& p, Stream stream);
// Sets n contiguous elements of `dtype` to `value` (converted to the dtype).
void fill(void* dst, int64_t n, DType dtype, double value, Stream stream);
// Contiguous byte copies between host and device (or device and device) on `stream`.
// Host->device from pageable memory returns once the source was read; from pinned memory it may
// return at once, so the caller keeps the source alive until the stream passes this point.
// Device->host waits for the copy to finish.
void copy_bytes(void* dst, const void* src, size_t nbytes, bool dst_is_device, bool src_is_device,
                Stream stream);

}  // namespace ft::cuda
