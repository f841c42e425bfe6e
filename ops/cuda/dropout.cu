#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/dropout.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kPack = 8;  // elements per vector access

// Eight consecutive elements, aligned so that they move as one (bf16/f16) or two (f32) 16-byte
// memory transactions.
template <class T>
struct alignas(kPack * sizeof(T)) Pack8 {
  T v[kPack];
};

// Grid: x covers column blocks (16 columns), kCbPerBlock per CTA; y covers row pairs (rows r and
// r + 8 of a 16-row block), kPairsPerBlock x kPairsPerThread per CTA, grid-striding past the 65535
// limit. Indices come from the 2-D launch rather than from dividing a flat index by the column-block
// count (a division per thread and call: taking it out alone gave 0.0221 -> 0.0203 ms at
// (16384, 768)). Each thread takes kPairsPerThread consecutive row pairs per iteration and draws
// their Philox calls together, so the calls' dependency chains overlap. H200, (16384, 768) /
// (16384, 3072) bf16: 0.0170 / 0.0527 ms against 0.0177 / 0.0583 with one pair per thread and
// 0.0174 / 0.0574 with two; other CTA shapes with one pair (16 x 1 to 16 x 8, 8 x 4) 0.0180-0.0191 /
// 0.0610-0.0659.
constexpr int kCbPerBlock = 16, kPairsPerBlock = 4, kPairsPerThread = 4;
constexpr unsigned kMaxGridY = 65535;

// Four lanes per pair of rows and 16-column block: the 32 elements of four Philox calls
// (core/dropout_mask.h). Lane q of the four draws the call of column group q and writes row
// r + 8 (q / 2), columns 8 (q % 2) .. 8 (q % 2) + 7 of the block: 8 consecutive elements, one 16-byte
// access for bf16 / f16, so a warp's accesses cover two contiguous 256-byte runs. Those elements'
// pieces are word q of each of the four calls, so the lanes exchange keep bits: each compares its
// own call's eight pieces into a byte (bit 2w + h: word w, half h), and two xor shuffles gather the
// quad's four bytes. With one pair per thread this took 0.0173 / 0.0572 ms at the sizes above,
// against 0.0221 / 0.0764 exchanging the Philox words (three shuffles and 24 selects) and 0.0235 /
// 0.0787 with no exchange (each lane writing its own call's elements, 4-byte accesses).
// kVec: cols is a multiple of 16 and the buffers are Pack8-aligned. The threshold is >= 1
// (dropout_bound); p = 0 is a copy.
template <class T, bool kVec>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t cols,
                               uint32_t col_blocks, uint32_t pairs, DropoutParams d) {
  resolve_dropout_offset(d);  // graph replay: the offset lives in device memory
  const int lane = threadIdx.x & 31, q = lane & 3;
  const uint32_t cb = blockIdx.x * kCbPerBlock + threadIdx.x / 4;
  if (cb >= col_blocks) return;  // whole quads leave together: the shuffles below stay within quads
  const uint32_t bound = dropout_bound(d);
  const unsigned quad = 0xFu << (lane & ~3);
  // pairs is a multiple of 8 and pair0 of kPairsPerThread, so pair0 < pairs covers all of them.
  for (uint32_t pair0 = (blockIdx.y * kPairsPerBlock + threadIdx.y) * kPairsPerThread; pair0 < pairs;
       pair0 += gridDim.y * kPairsPerBlock * kPairsPerThread) {
    uint32_t keep[kPairsPerThread];
#pragma unroll
    for (int u = 0; u < kPairsPerThread; ++u) {
      const PhiloxBits w = dropout_bits(d, 0, pair0 + u, 4 * cb + q);
      uint32_t byte = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        byte |= static_cast<uint32_t>(dropout_keep_lo(w.v[k], bound)) << (2 * k);
        byte |= static_cast<uint32_t>(dropout_keep_hi(w.v[k], bound)) << (2 * k + 1);
      }
      uint32_t all = byte << (8 * q);  // the byte of column group g sits at bits 8 g ..
      all |= __shfl_xor_sync(quad, all, 1);
      all |= __shfl_xor_sync(quad, all, 2);
      keep[u] = all >> (2 * q);  // column 8 (q % 2) + j of the block: call j / 2, word q, half j % 2
    }
#pragma unroll
    for (int u = 0; u < kPairsPerThread; ++u) {
      const uint32_t pair = pair0 + u;
      const int64_t row = static_cast<int64_t>(pair / 8) * 16 + pair % 8 + 8 * (q >> 1);
      if (row >= rows) continue;
      auto apply = [&](int j, float v) {
        return from_f32<T>((keep[u] >> (8 * (j >> 1) + (j & 1))) & 1u ? v * d.keep_scale : 0.f);
      };
      const int64_t col0 = static_cast<int64_t>(cb) * 16 + 8 * (q & 1);
      const int64_t base = row * cols + col0;
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
        for (int j = 0; j < kPack; ++j)
          if (j < count) y[base + j] = apply(j, to_f32(x[base + j]));
      }
    }
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

void dropout(const DropoutKernelParams& p, Stream s) {
  if (p.mask.threshold == 0) {  // p = 0: every element kept, scale 1
    CUDA_CHECK(cudaMemcpyAsync(p.y, p.x, static_cast<size_t>(p.rows * p.cols) * dtype_size(p.dtype),
                               cudaMemcpyDeviceToDevice, s));
    return;
  }
  dispatch_cuda_float(p.dtype, "[dropout]", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(p.x);
    T* y = static_cast<T*>(p.y);
    // ops/dropout.cpp keeps rows below 2^32, so row pairs (rows / 2 + 8) and column groups fit 32 bits.
    const auto col_blocks = static_cast<uint32_t>((p.cols + 15) / 16);
    const auto pairs = static_cast<uint32_t>((p.rows + 15) / 16 * 8);
    const unsigned pairs_per_cta = kPairsPerBlock * kPairsPerThread;
    const dim3 grid((col_blocks + kCbPerBlock - 1) / kCbPerBlock,
                    std::min((pairs + pairs_per_cta - 1) / pairs_per_cta, kMaxGridY));
    const dim3 block(4 * kCbPerBlock, kPairsPerBlock);
    const bool vec = p.cols % 16 == 0 && aligned(x, sizeof(Pack8<T>)) && aligned(y, sizeof(Pack8<T>));
    if (vec) dropout_kernel<T, true><<<grid, block, 0, s>>>(x, y, p.rows, p.cols, col_blocks, pairs, p.mask);
    else dropout_kernel<T, false><<<grid, block, 0, s>>>(x, y, p.rows, p.cols, col_blocks, pairs, p.mask);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace ft::cuda
