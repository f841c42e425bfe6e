#include "core/cuda/check.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kPack = 8;  // elements per vector access

// Eight consecutive elements, aligned so that they move as one (bf16/f16) or two (f32) 16-byte
// memory transactions.
template <class T>
struct alignas(kPack * sizeof(T)) Pack8 {
  T v[kPack];
};

// Word `idx` (0..3, differs between lanes) of a Philox output, by selects: a runtime index into
// the array would put it in local memory.
__device__ __forceinline__ uint32_t philox_word(const PhiloxBits& w, int idx) {
  const uint32_t lo = (idx & 1) ? w.v[1] : w.v[0], hi = (idx & 1) ? w.v[3] : w.v[2];
  return (idx & 2) ? hi : lo;
}

// Four lanes per pair of rows (r, r + 8 of a 16-row block) and 16-column block: the 32 elements of
// four Philox calls (core/dropout_mask.h). Lane q of the four draws the call of column group q and
// writes row r + 8 (q / 2), columns 8 (q % 2) .. 8 (q % 2) + 7 of the block: 8 consecutive elements,
// one 16-byte access for bf16 / f16, so a warp's accesses cover two contiguous 256-byte runs. The
// pieces of those elements are word q of each of the four calls: a 4 x 4 transpose of words across
// the lanes (three shuffles). (One thread per block drawing all four calls, with two strided 16-byte
// accesses per row, was 30-35% slower on an H200.) kVec: cols is a multiple of 16 and the buffers are
// Pack8-aligned.
template <class T, bool kVec>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                               int64_t col_blocks, DropoutParams d) {
  resolve_dropout_offset(d);  // graph replay: the offset lives in device memory
  const int lane = threadIdx.x & 31, q = lane & 3;
  const unsigned quad = 0xFu << (lane & ~3);
  const int64_t n = (rows + 15) / 16 * 8 * col_blocks;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x / 4;
  for (int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 4; i < n; i += stride) {
    const int64_t cb = i % col_blocks;
    const int64_t pair = i / col_blocks;  // = dropout_row_pair(row r)
    const PhiloxBits w = dropout_bits(d, 0, static_cast<uint32_t>(pair), static_cast<uint32_t>(4 * cb + q));
    // Round k reads from quad lane q + k, which sends its word (q + k) - k = q: got.v[k] is word q of
    // column group (q + k) % 4's call. Rotated back into u.v[c] = word q of group c by selects (an
    // array indexed by q would live in local memory).
    PhiloxBits got;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t send = philox_word(w, (q - k) & 3);
      got.v[k] = k == 0 ? send : __shfl_sync(quad, send, (lane & ~3) | ((q + k) & 3));
    }
    uint32_t u[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) u[c] = philox_word(got, (c - q) & 3);
    const int64_t row = pair / 8 * 16 + pair % 8 + 8 * (q >> 1);
    const int64_t col0 = cb * 16 + 8 * (q & 1);
    if (row >= rows) continue;
    const int64_t base = row * cols + col0;
    auto apply = [&](int j, float v) {  // element col0 + j: call j / 2, half j % 2
      const uint32_t piece = (j & 1) ? (u[j >> 1] >> 16) : (u[j >> 1] & 0xFFFFu);
      return from_f32<T>(piece >= d.threshold ? v * d.keep_scale : 0.f);
    };
    if constexpr (kVec) {
      const Pack8<T> in = *reinterpret_cast<const Pack8<T>*>(x + base);
      Pack8<T> out;
#pragma unroll
      for (int j = 0; j < kPack; ++j) out.v[j] = apply(j, to_f32(in.v[j]));
      *reinterpret_cast<Pack8<T>*>(y + base) = out;
    } else {
      const int64_t left = cols - col0;
      const int count = left < kPack ? static_cast<int>(left) : kPack;
#pragma unroll
      for (int j = 0; j < kPack; ++j)  // j stays a constant, so u[j >> 1] stays in registers
        if (j < count) y[base + j] = apply(j, to_f32(x[base + j]));
    }
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void dropout(const DropoutKernelParams& p, Stream s) {
  dispatch_cuda_float(p.dtype, "[dropout]", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p.x);
    T* y = static_cast<T*>(p.y);
    const int64_t col_blocks = (p.cols + 15) / 16;
    const unsigned grid = grid_1d((p.rows + 15) / 16 * 8 * col_blocks * 4, kBlock);  // 4 lanes per block
    const bool vec = p.cols % 16 == 0 && aligned(x, sizeof(Pack8<T>)) && aligned(y, sizeof(Pack8<T>));
    if (vec) dropout_kernel<T, true><<<grid, kBlock, 0, s>>>(x, y, p.rows, p.cols, col_blocks, p.mask);
    else dropout_kernel<T, false><<<grid, kBlock, 0, s>>>(x, y, p.rows, p.cols, col_blocks, p.mask);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
