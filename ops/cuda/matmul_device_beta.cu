// Device-memory betas for cuBLASLt's device pointer mode (ops/cuda/matmul.h): in that mode alpha
// and beta are both read from device memory, so a product with a device alpha also needs its beta
// (0: overwrite, 1: accumulate) there. Statically initialised __device__ constants need no
// allocation and no host-to-device copy -- nothing that could run inside a CUDA-graph capture.
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "ops/cuda/matmul.h"

namespace ft::cuda {
namespace {

__device__ const float kBetas[2] = {0.f, 1.f};

}  // namespace

const float* matmul_device_beta(float beta) {
  FT_ASSERT(beta == 0.f || beta == 1.f, "[matmul] a device beta is 0 or 1, got ", beta);
  // The symbol's address differs per device (each has its own copy of the module).
  static std::mutex mu;
  static std::vector<const float*> by_device;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (by_device.size() <= static_cast<size_t>(device)) by_device.resize(static_cast<size_t>(device) + 1, nullptr);
  const float*& base = by_device[static_cast<size_t>(device)];
  if (!base) {
    void* p = nullptr;
    CUDA_CHECK(cudaGetSymbolAddress(&p, kBetas));
    base = static_cast<const float*>(p);
  }
  return base + (beta == 0.f ? 0 : 1);
}

}  // namespace ft::cuda
