#include "core/cuda/context.h"

#include <memory>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/check.h"
#include "core/device.h"

namespace ft {
namespace cuda {
namespace {
// cuBLASLt on Hopper wants a 32 MiB workspace for its best kernels (NVIDIA's cuBLAS docs).
constexpr size_t kWorkspaceBytes = 32u << 20;
}  // namespace

Context& context(int device) {
  static std::mutex mu;
  static std::vector<Context*>* contexts = new std::vector<Context*>();
  std::lock_guard<std::mutex> lock(mu);
  FT_CHECK_ARG(device >= 0 && device < cuda_device_count(), "[cuda] device ", device,
               " requested, ", cuda_device_count(), " available");
  if (contexts->size() <= static_cast<size_t>(device)) contexts->resize(device + 1, nullptr);
  CUDA_CHECK(cudaSetDevice(device));
  Context*& c = (*contexts)[device];
  if (!c) {
    auto fresh = std::make_unique<Context>();
    fresh->device = device;
    CUDA_CHECK(cudaGetDeviceProperties(&fresh->props, device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&fresh->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&fresh->blas));
    CUBLAS_CHECK(cublasSetStream(fresh->blas, fresh->stream));
    CUBLAS_CHECK(cublasLtCreate(&fresh->blas_lt));
    fresh->workspace_bytes = kWorkspaceBytes;
    fresh->workspace = cuda_allocator(device).allocate(kWorkspaceBytes);
    CUBLAS_CHECK(cublasSetWorkspace(fresh->blas, fresh->workspace, fresh->workspace_bytes));
    c = fresh.release();
  }
  return *c;
}

}  // namespace cuda

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no device: clear the sticky error, report 0
      return 0;
    }
    return n;
  }();
  return count;
}

Stream stream_for(Device d) {
  FT_CHECK_ARG(d.is_cuda(), "[stream_for] ", d, " has no stream");
  return cuda::context(d.index).stream;
}

void synchronize(Device d) {
  if (d.is_cuda()) CUDA_CHECK(cudaStreamSynchronize(cuda::context(d.index).stream));
}

}  // namespace ft
