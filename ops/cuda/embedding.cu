// CUDA embedding: a vectorised gather forward and a deterministic sort-based scatter-add
// backward (see embedding.h).
#include "ops/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per kVec-element vector of the output.
template <class T, int kVec>
__global__ void __launch_bounds__(kThreads) embedding_forward_kernel(EmbeddingForwardParams p) {
  const int64_t nvec = p.cols / kVec;  // vectors per row
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < p.n * nvec; idx += stride) {
    const int64_t i = idx / nvec, v = idx % nvec;
    const int32_t id = p.ids[i];
    T* dst = static_cast<T*>(p.out) + i * p.cols + v * kVec;
    if (id >= 0 && id < p.vocab) {
      store_raw<T, kVec>(dst, load_raw<T, kVec>(static_cast<const T*>(p.weight) + id * p.cols + v * kVec));
    } else {
      float nan[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) nan[j] = NAN;
      store_vec<kVec>(dst, nan);
    }
  }
}

// keys[i] = ids[i] (or V for an id outside [0, V), sorted last and skipped); vals[i] = i.
__global__ void embedding_sort_keys_kernel(const int32_t* ids, int64_t n, int64_t vocab, uint32_t* keys, uint32_t* vals) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int32_t id = ids[i];
  keys[i] = (id >= 0 && id < vocab) ? static_cast<uint32_t>(id) : static_cast<uint32_t>(vocab);
  vals[i] = static_cast<uint32_t>(i);
}

// Block b handles sorted position b if it starts a run of equal ids: it sums the run's dout
// rows and adds the sum to dweight[id]. Each dweight row has exactly one writer, so no atomics.
// Frequent tokens make long runs (a few percent of a GPT-2 batch is "the" or ","), so the
// block splits a run over kSegGroups row groups (rows b + y, b + y + kSegGroups, ...) and then
// adds the groups in order through shared memory: a fixed order, hence a deterministic sum.
// The longest run decides the kernel's time (about 1,000 rows of 16,384 in a batch of English
// text), so a thread loads all its kSegPer vectors of a row at once -- up to 32 * kSegPer * kVec
// columns (768 bf16 columns: 3 vectors a lane) in one sweep over the run's rows, kSegPer loads in
// flight a row where one sweep per 32 vectors had one. The run's row numbers are staged in shared
// memory, kSegIdx at a time (coalesced), so a row's loads do not wait for a global load of its
// number first. Each element is still added in the same order (its group's rows in turn, then the
// groups in order).
constexpr int kSegCols = 32, kSegGroups = 8, kSegPer = 3, kSegIdx = 1024;
static_assert(kSegIdx % kSegGroups == 0, "a chunk of staged rows keeps each group's rows in order");

template <class T, int kVec>
__global__ void __launch_bounds__(kSegCols * kSegGroups) embedding_backward_segment_kernel(
    EmbeddingBackwardParams p, const uint32_t* keys, const uint32_t* rows) {
  __shared__ float partial[kSegGroups][kSegPer][kVec][kSegCols];
  __shared__ uint32_t staged[kSegIdx];
  __shared__ int64_t seg_end;
  const int64_t b = blockIdx.x;
  const uint32_t id = keys[b];
  if (id >= p.vocab || (b > 0 && keys[b - 1] == id)) return;  // the same for the whole block
  if (threadIdx.x == 0 && threadIdx.y == 0) {  // end of the run: keys are sorted, binary search
    int64_t lo = b + 1, hi = p.n;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (keys[mid] == id) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    seg_end = lo;
  }
  __syncthreads();
  const int64_t end = seg_end;
  const T* dout = static_cast<const T*>(p.dout);
  float* dw = p.dweight + static_cast<int64_t>(id) * p.cols;  // (C)
  const int64_t nvec = p.cols / kVec;
  for (int64_t v0 = 0; v0 < nvec; v0 += kSegCols * kSegPer) {
    float acc[kSegPer][kVec];
#pragma unroll
    for (int q = 0; q < kSegPer; ++q)
#pragma unroll
      for (int j = 0; j < kVec; ++j) acc[q][j] = 0.f;
    const int tid = threadIdx.y * kSegCols + threadIdx.x;
    for (int64_t c0 = b; c0 < end; c0 += kSegIdx) {
      const int n = static_cast<int>(end - c0 < kSegIdx ? end - c0 : kSegIdx);
      __syncthreads();  // the chunk before is read
      for (int i = tid; i < n; i += kSegCols * kSegGroups) staged[i] = rows[c0 + i];
      __syncthreads();
#pragma unroll 4
      for (int i = threadIdx.y; i < n; i += kSegGroups) {
        const T* row = dout + static_cast<int64_t>(staged[i]) * p.cols;
#pragma unroll
        for (int q = 0; q < kSegPer; ++q) {
          const int64_t v = v0 + q * kSegCols + threadIdx.x;
          if (v < nvec) {
            float g[kVec];
            load_vec<kVec>(row + v * kVec, g);
#pragma unroll
            for (int j = 0; j < kVec; ++j) acc[q][j] += g[j];
          }
        }
      }
    }
#pragma unroll
    for (int q = 0; q < kSegPer; ++q)
#pragma unroll
      for (int j = 0; j < kVec; ++j) partial[threadIdx.y][q][j][threadIdx.x] = acc[q][j];
    __syncthreads();
    if (threadIdx.y == 0) {
#pragma unroll
      for (int q = 0; q < kSegPer; ++q) {
        const int64_t v = v0 + q * kSegCols + threadIdx.x;
        if (v >= nvec) continue;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          float total = 0.f;
#pragma unroll
          for (int g = 0; g < kSegGroups; ++g) total += partial[g][q][j][threadIdx.x];
          dw[v * kVec + j] += total;
        }
      }
    }
    __syncthreads();
  }
}

int key_bits(int64_t vocab) {  // bits that hold every key in [0, vocab]
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab) ++bits;
  return bits;
}

size_t align_up(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void embedding_forward(const EmbeddingForwardParams& p, Stream stream) {
  if (p.n == 0 || p.cols == 0) return;
  dispatch_cuda_float(p.dtype, "[embedding_forward]", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    auto blocks_for = [&](int vec) {
      return static_cast<unsigned>(std::clamp<int64_t>((p.n * (p.cols / vec) + kThreads - 1) / kThreads, 1, int64_t{1} << 30));
    };
    if (p.cols % kVec == 0 && aligned16(p.weight) && aligned16(p.out)) {
      embedding_forward_kernel<T, kVec><<<blocks_for(kVec), kThreads, 0, stream>>>(p);
    } else {
      embedding_forward_kernel<T, 1><<<blocks_for(1), kThreads, 0, stream>>>(p);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void embedding_backward(const EmbeddingBackwardParams& p, Stream stream) {
  if (p.n == 0 || p.cols == 0) return;
  FT_ASSERT(p.n <= INT32_MAX && p.vocab < UINT32_MAX, "embedding_backward sizes n=", p.n, " V=", p.vocab);
  const int n = static_cast<int>(p.n);
  const size_t arr = align_up(p.n * sizeof(uint32_t));
  size_t sort_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr), static_cast<const uint32_t*>(nullptr),
                                             static_cast<uint32_t*>(nullptr), n, 0, key_bits(p.vocab), stream));
  Scratch scratch(p.device, 4 * arr + sort_bytes);
  char* base = static_cast<char*>(scratch.ptr);
  auto* keys_in = reinterpret_cast<uint32_t*>(base);
  auto* vals_in = reinterpret_cast<uint32_t*>(base + arr);
  auto* keys = reinterpret_cast<uint32_t*>(base + 2 * arr);
  auto* rows = reinterpret_cast<uint32_t*>(base + 3 * arr);
  void* sort_tmp = base + 4 * arr;
  embedding_sort_keys_kernel<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      p.ids, p.n, p.vocab, keys_in, vals_in);
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_tmp, sort_bytes, keys_in, keys, vals_in, rows, n, 0,
                                             key_bits(p.vocab), stream));
  dispatch_cuda_float(p.dtype, "[embedding_backward]", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    if (p.cols % kVec == 0 && aligned16(p.dout)) {
      embedding_backward_segment_kernel<T, kVec><<<static_cast<unsigned>(p.n), dim3(kSegCols, kSegGroups), 0, stream>>>(p, keys, rows);
    } else {
      embedding_backward_segment_kernel<T, 1><<<static_cast<unsigned>(p.n), dim3(kSegCols, kSegGroups), 0, stream>>>(p, keys, rows);
    }
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
