#include "core/cuda/side_stream.h"

#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/cuda/context.h"

namespace ft::cuda {

SideStream::SideStream(int device) : device_(device) {
  context(device);  // makes the device current
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&joined_, cudaEventDisableTiming));
}

SideStream::~SideStream() {
  if (joined_) (void)cudaEventDestroy(joined_);
  if (forked_) (void)cudaEventDestroy(forked_);
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void SideStream::fork() {
  CUDA_CHECK(cudaEventRecord(forked_, context(device_).stream));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, forked_, 0));
}

void SideStream::join() {
  CUDA_CHECK(cudaEventRecord(joined_, stream_));
  CUDA_CHECK(cudaStreamWaitEvent(context(device_).stream, joined_, 0));
}

}  // namespace ft::cuda
