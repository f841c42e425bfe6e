// CUDA document starts: one CTA per row; each thread scans a contiguous chunk of the row, the
// chunks' maxima are max-scanned across the block, and each thread writes its chunk again with
// the maximum of the chunks before it. Rows are a few thousand tokens: one pass, no atomics.
#include "ops/cuda/document_mask.h"

#include <cub/block/block_scan.cuh>

#include "core/cuda/check.h"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

struct MaxOp {
  __device__ __forceinline__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

__global__ void __launch_bounds__(kThreads) document_starts_kernel(DocumentStartsParams p) {
  using Scan = cub::BlockScan<int32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const int64_t T = p.T;
  const int32_t* tokens = p.tokens + blockIdx.x * T;
  int32_t* out = p.doc_start + blockIdx.x * T;
  const int64_t chunk = (T + kThreads - 1) / kThreads;
  const int64_t begin = threadIdx.x * chunk, end = begin + chunk < T ? begin + chunk : T;
  int32_t local = 0;  // the last eot of this thread's chunk (0: none, or the one at position 0)
  for (int64_t t = begin; t < end; ++t)
    if (tokens[t] == p.eot_token) local = static_cast<int32_t>(t);
  int32_t before = 0;  // the last eot of the chunks before this one
  Scan(scan_storage).ExclusiveScan(local, before, 0, MaxOp());
  int32_t start = before;
  for (int64_t t = begin; t < end; ++t) {
    if (tokens[t] == p.eot_token) start = static_cast<int32_t>(t);
    out[t] = start;
  }
}

}  // namespace

void document_starts(const DocumentStartsParams& p, Stream stream) {
  if (p.rows == 0 || p.T == 0) return;
  document_starts_kernel<<<static_cast<unsigned>(p.rows), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda
