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

// kGridDq: also what the grid form of the deterministic dQ needs (flash_dq_accum.cuh): per row
// keep_scale |dO|_2, and per batch * head max |K|_inf and max |V row|_2 by atomicMax on the float
// bits (non-negative floats order as their bits; the launcher zeroes the maxima before this kernel).
template <int kHeadDim, bool kBF16, bool kGridDq = false>
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
  float dot = 0.f, do_sq = 0.f, k_max = 0.f, v_sq = 0.f;
  int bh_row = -1;
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
      if constexpr (kGridDq) do_sq = fmaf(df.x, df.x, fmaf(df.y, df.y, do_sq));
    }
    if constexpr (kGridDq) {
      bh_row = bh;
      const int hk = attention_kv_head(p, h);
      const uint4 k = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.k) + b * p.k_batch_stride +
                                                      t * p.k_row_stride + hk * p.k_head_stride + c);
      const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.v) + b * p.v_batch_stride +
                                                      t * p.v_row_stride + hk * p.v_head_stride + c);
      const uint32_t kw[4] = {k.x, k.y, k.z, k.w}, vw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 kf = unpack2<kBF16>(kw[i]), vf = unpack2<kBF16>(vw[i]);
        k_max = fmaxf(k_max, fmaxf(fabsf(kf.x), fabsf(kf.y)));
        v_sq = fmaf(vf.x, vf.x, fmaf(vf.y, vf.y, v_sq));
      }
    }
  }
#pragma unroll
  for (int off = kThreadsPerRow / 2; off > 0; off /= 2) {
    dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if constexpr (kGridDq) {
      do_sq += __shfl_xor_sync(0xffffffffu, do_sq, off);
      v_sq += __shfl_xor_sync(0xffffffffu, v_sq, off);
      k_max = fmaxf(k_max, __shfl_xor_sync(0xffffffffu, k_max, off));
    }
  }
  if (row_id < rows && c == 0) p.dsum[row_id] = dot;
  if constexpr (kGridDq) {
    // (K and V rows are read once per query head: grouped-query heads read their shared rows again.)
    const int64_t bh_count = static_cast<int64_t>(p.B) * p.H;
    if (row_id < rows && c == 0)
      p.dq_accum[dq_grid_rows_offset(bh_count, p.T, kHeadDim) + row_id] = sqrtf(do_sq) * p.dropout.keep_scale;
    // One atomicMax per head and warp: the lanes of this warp's rows of the same head agree first.
    const unsigned same_head = __match_any_sync(0xffffffffu, bh_row);
    const unsigned k_bits = __reduce_max_sync(same_head, __float_as_uint(k_max));
    const unsigned v_bits = __reduce_max_sync(same_head, __float_as_uint(sqrtf(v_sq)));
    if (bh_row >= 0 && (threadIdx.x % 32) == __ffs(same_head) - 1) {
      unsigned* maxima = reinterpret_cast<unsigned*>(p.dq_accum + dq_grid_maxima_offset(bh_count, p.T, kHeadDim));
      atomicMax(maxima + bh_row, k_bits);
      atomicMax(maxima + bh_count + bh_row, v_bits);
    }
  }
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
