// The two small kernels around the flash backward main kernel.
//   flash_bwd_preprocess_kernel: D = rowsum(dO o O) in fp32 (B, H, T), and zeroes the n_accum
//     floats of the fp32 dQ accumulator that the main kernel adds into and the n_semaphores dQ
//     counters of the deterministic mode -- one pass, no separate memset (n_accum 0: the split
//     deterministic backward, whose dQ kernel writes dq directly, needs neither).
//   flash_bwd_convert_dq_kernel: dQ = softmax_scale * dq_accum, rounded to the input dtype and
//     written (B, T, H, D) with dq's strides; dq_accum is in its tile layout (flash_dq_accum.cuh),
//     fp32 or (kFixedDq) int64 fixed point, whose head's overflow flag turns its dQ into NaN.
// Both are memory-bound, with 16-byte loads: the preprocess kernel has kThreadsPerRow threads per
// (b, t, h) row, the convert kernel one thread per 16-byte chunk of dq_accum and 16-byte stores.
#pragma once

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_dq_accum.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"

namespace ft::cuda::flash {

template <int kHeadDim, bool kBF16>
__global__ void flash_bwd_preprocess_kernel(const AttentionParams p, int* semaphores,
                                            int64_t n_semaphores, int64_t n_accum) {
  constexpr int kThreadsPerRow = kHeadDim / 8;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = idx; i < n_semaphores; i += stride) semaphores[i] = 0;
  for (int64_t i = idx; i < n_accum / 4; i += stride)
    reinterpret_cast<float4*>(p.dq_accum)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  const int64_t row_id = idx / kThreadsPerRow;  // = bh * T + t
  const int c = static_cast<int>(idx % kThreadsPerRow) * 8;
  const int64_t rows = static_cast<int64_t>(p.B) * p.H * p.T;
  float dot = 0.f;
  if (row_id < rows) {
    const int t = static_cast<int>(row_id % p.T), bh = static_cast<int>(row_id / p.T);
    const int b = bh / p.H, h = bh % p.H;
    const uint4 o = *reinterpret_cast<const uint4*>(
        static_cast<const uint16_t*>(p.o) + b * p.o_batch_stride + t * p.o_row_stride +
        h * p.o_head_stride + c);
    const uint4 d = *reinterpret_cast<const uint4*>(
        static_cast<const uint16_t*>(p.dout) + b * p.do_batch_stride + t * p.do_row_stride +
        h * p.do_head_stride + c);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w}, dw[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 of = unpack2<kBF16>(ow[i]), df = unpack2<kBF16>(dw[i]);
      dot = fmaf(of.x, df.x, fmaf(of.y, df.y, dot));
    }
  }
#pragma unroll
  for (int off = kThreadsPerRow / 2; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
  if (row_id < rows && c == 0) p.dsum[row_id] = dot;
}

// One block of kConvertThreads threads per 256 consecutive chunks of dq_accum, which are 8 n8 tiles
// (64 columns) of one 16-row tile of one head: each thread scales and rounds its chunk into a
// shared 16 x 64 tile, then half the block writes the tile's rows out with 16-byte stores. (Written
// straight from the chunks, each lane stored 4 bytes into 16-byte row pieces: 0.071 ms against
// FA2's 0.061 ms at T = 2048 on an H100, session 8.)
constexpr int kConvertThreads = 256;
template <int kHeadDim, bool kBF16, bool kFixedDq>
__global__ void __launch_bounds__(kConvertThreads) flash_bwd_convert_dq_kernel(const AttentionParams p) {
  using L = DqAccumLayout<kHeadDim>;
  static_assert(kHeadDim % 64 == 0 && L::kRowAlign % 16 == 0, "a block is 64 columns of a 16-row tile");
  constexpr int kStride = 64 + 8;  // padded rows: the 4-byte writes below hit 32 distinct banks
  __shared__ __align__(16) uint16_t tile[16 * kStride];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kConvertThreads;  // chunk number
  const int64_t chunks_per_head = L::rows(p.T) * kHeadDim / 4;
  const int bh = static_cast<int>(first / chunks_per_head);
  const int64_t head_chunk = first % chunks_per_head;
  const int row0 = L::row_of(head_chunk), col0 = L::col_of(head_chunk);  // the block's tile corner
  // A slab wholly past T writes nothing, and its accumulator rows may never have been written (the
  // ordered dQ's 64-row tiles end before dq_accum's 128-row padding does, unzeroed:
  // ws_first_block_stores_dq).
  if (row0 >= p.T) return;
  const int tid = threadIdx.x, lane = tid % 32;
  float4 x;  // dQ before the softmax scale (fp32 path) or after it (fixed point)
  if constexpr (kFixedDq) {
    // The chunk's four words (flash_dq_accum.cuh), scaled back (softmax scale included) in double:
    // the integer sum is exact, so this is dQ's one rounding before the dtype's.
    const unsigned long long* w = dq_fixed_words<kHeadDim>(p.dq_accum, bh, p.T) +
                                  L::fixed_word((head_chunk + tid) * 4, lane);
    const bool overflow = *dq_fixed_flag<kHeadDim>(p.dq_accum, static_cast<int64_t>(p.B) * p.H, bh, p.T) != 0;
    const double unit = static_cast<double>(p.softmax_scale) / static_cast<double>(1ull << kDqFixedFracBits);
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      v[e] = overflow ? NAN : static_cast<float>(static_cast<double>(static_cast<long long>(w[32 * e])) * unit);
    x = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    x = reinterpret_cast<const float4*>(p.dq_accum)[first + tid];
  }
  const float s = kFixedDq ? 1.f : p.softmax_scale;
  const int r = lane / 4, col = (tid / 32) * 8 + 2 * (lane % 4);
  *reinterpret_cast<uint32_t*>(tile + r * kStride + col) = pack2<kBF16>(x.x * s, x.y * s);
  *reinterpret_cast<uint32_t*>(tile + (r + 8) * kStride + col) = pack2<kBF16>(x.z * s, x.w * s);
  __syncthreads();
  if (tid < 16 * 8) {
    const int row = tid / 8, c8 = (tid % 8) * 8, t = row0 + row;
    const int b = bh / p.H, h = bh % p.H;
    if (t < p.T)
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p.dq) + b * p.dq_batch_stride + t * p.dq_row_stride +
                                h * p.dq_head_stride + col0 + c8) =
          *reinterpret_cast<const uint4*>(tile + row * kStride + c8);
  }
}

}  // namespace ft::cuda::flash
