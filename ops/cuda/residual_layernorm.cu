// CUDA residual add + dropout + LayerNorm (see ops/residual_layernorm.h). Two paths, picked at
// the launcher:
// - vector path (C a multiple of 8, every buffer aligned to 8 elements, C <= 32 * 8 * kMaxIters):
//   one warp per PAIR of rows (r, r + 8) of a 16-row block, each lane holding chunks
//   lane + 32k (8 consecutive elements) of both rows in registers. The pair is what one Philox
//   call of the dropout mask covers (core/dropout_mask.h): each call serves 8 elements, as in
//   ops/cuda/dropout.cu, instead of 2 with one row per warp. The LayerNorm row code is
//   ops/cuda/layernorm_row.cuh, shared with ops/cuda/layernorm.cu's register paths: for halves
//   (whose vectors are 8 elements in both) z, mean, rstd and the LayerNorm part of dy equal the
//   unfused kernels' bit for bit; for f32 (4-element vectors there) the order of sums differs.
// - scalar path (any C, any alignment): one warp per row, looping over columns, the mask drawn
//   per element with dropout_keep_at.
// The backward sums dweight/dbias per lane in registers, per block in warp order, then over
// blocks in block order in a second kernel: deterministic for a given device and shape, but in
// another order than ops::layernorm_backward's (so equal to it within fp32 rounding only). The
// branch bias's gradient (dh's row sums) goes the same way, its per-lane sums in shared memory:
// the vector backward is at its 168-register cap already.
#include "ops/cuda/residual_layernorm.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/layernorm_row.cuh"

namespace ft::cuda {
namespace {

constexpr int kChunk = 8;  // elements per lane access: one 16-byte vector of halves, two of f32
constexpr int kFwdWarps = 4;   // warps (row pairs) per block, forward vector path
constexpr int kBwdWarps = 4;   // warps per block, backward vector path
constexpr int kBwdStages = 3;  // row slots a warp's ring holds, backward vector path
constexpr int kScalarThreads = 32;  // the scalar paths: one warp per block
constexpr int kMaxScalarBlocks = 1024;
// Registers per lane in the vector path grow with kIters (2 rows x (y, gz) chunks plus dweight
// and dbias in the backward); beyond these the scalar path takes over. GPT-2 small (C = 768,
// bf16) needs 3.
template <class T>
constexpr int kMaxIters = sizeof(T) == 2 ? 4 : 2;

template <class T>
using Chunk = Vec<T, kChunk>;

template <class T>
__device__ __forceinline__ Chunk<T> zero_chunk() {
  Chunk<T> c;
#pragma unroll
  for (int j = 0; j < kChunk; ++j) c.v[j] = from_f32<T>(0.f);
  return c;
}

// A parameter chunk at p: kChunk elements of W (T, or fp32 under halves).
template <class T, class W>
__device__ __forceinline__ ParamRaw<T, Chunk<T>, W> load_param(const W* p) {
  return load_raw<W, kChunk>(p);
}

// Rows of row pair `pair`: 16 (pair / 8) + pair % 8 and 8 more (core/dropout_mask.h's row pair).
__device__ __forceinline__ int64_t pair_row(uint32_t pair, int half) {
  return static_cast<int64_t>(pair / 8) * 16 + pair % 8 + 8 * half;
}

// Keep bits of chunk `chunk` (columns 8 chunk .. + 7) in both rows of `pair`: bit j for the first
// row's column 8 chunk + j, bit 8 + j for the second's. Chunks 2m and 2m + 1 share the four Philox
// calls of 16-column block m, each call holding a word for each (chunk, row) of the block; the lane
// of chunk 2m + s draws calls 2s and 2s + 1 of the four and the two lanes (l and l ^ 1, since
// chunk = lane + 32k) swap bits: one call per 8 elements. Called by the whole warp.
__device__ __forceinline__ uint32_t keep_bits(const DropoutParams& d, uint32_t bound, uint32_t pair, uint32_t chunk) {
  const uint32_t m = chunk / 2, s = chunk % 2;
  uint32_t all = 0;  // bit 16 c + 8 rh + 2 t + piece: chunk 2m + c, row half rh, call t, 16-bit piece
#pragma unroll
  for (uint32_t u = 0; u < 2; ++u) {
    const uint32_t t = 2 * s + u;
    const PhiloxBits w = dropout_bits(d, 0, pair, 4 * m + t);
#pragma unroll
    for (uint32_t rh = 0; rh < 2; ++rh) {
#pragma unroll
      for (uint32_t c = 0; c < 2; ++c) {
        const uint32_t word = w.v[2 * rh + c], bit = 16 * c + 8 * rh + 2 * t;
        all |= static_cast<uint32_t>(dropout_keep_lo(word, bound)) << bit;
        all |= static_cast<uint32_t>(dropout_keep_hi(word, bound)) << (bit + 1);
      }
    }
  }
  all |= __shfl_xor_sync(0xffffffffu, all, 1);
  return (all >> (16 * s)) & 0xFFFFu;
}

// Normalises one row held as chunks lane + 32k with ops/cuda/layernorm.cu's row code, and
// writes z, mean and rstd.
template <class T, class W, int kIters>
__device__ __forceinline__ void normalise_row(const Chunk<T> (&yr)[kIters], int lane, int nvec, int C, float eps,
                                              const W* w, const W* b, T* z, float* mean_out, float* rstd_out) {
  float mean, rstd;
  layernorm_row_stats<T>(yr, lane, nvec, C, eps, mean, rstd);
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
      float out[kChunk];
      layernorm_row_out<T>(yr[k], load_param<T>(w + i * kChunk), load_param<T>(b + i * kChunk), mean, rstd, out);
      store_vec<kChunk>(z + i * kChunk, out);
    }
  }
  if (lane == 0) {
    *mean_out = mean;
    *rstd_out = rstd;
  }
}

// Forward vector path: warp -> row pair. All loads of both rows are issued before the first use.
// Up to 3 chunks a lane (GPT-2 small's C = 768) the registers are held to 4 blocks an SM: the branch
// bias took the dropout kernel to 132 (3 blocks); with the bound, 125 and no spills. More chunks
// would spill under it.
template <class T, class W, int kIters, bool kDropout>
__global__ void __launch_bounds__(kFwdWarps * kWarpSize, kIters <= 3 ? 4 : 1)
    residual_layernorm_forward_kernel(ResidualLayerNormForwardParams p, uint32_t pairs) {
  DropoutParams d = p.mask;
  if constexpr (kDropout) resolve_dropout_offset(d);  // graph replay: the offset lives in device memory
  const int lane = threadIdx.x % kWarpSize;
  const uint32_t pair = blockIdx.x * kFwdWarps + threadIdx.x / kWarpSize;
  if (pair >= pairs) return;  // whole warps leave: the shuffles below see full warps
  const int C = static_cast<int>(p.cols);
  const int nvec = C / kChunk;
  // The branch bias, if any: each lane copies its own chunks into its warp's shared row (cp.async,
  // in flight with x and h, no registers) and reads them back for the add. Measured in session 39
  // (ncu, GPT-2's dropout forward, against no bias): loaded from global memory where used (135
  // registers, 3 blocks an SM) +14% a call; staged by the block behind a barrier +13%; this way
  // +10%. Loaded into registers with x and h it took 140 registers.
  __shared__ Chunk<T> hb_s[kFwdWarps][kIters * kWarpSize];
  const bool hb = p.h_bias != nullptr;
  Chunk<T>* hb_w = hb_s[threadIdx.x / kWarpSize];
  if (hb) {
    constexpr int kPieces = static_cast<int>(sizeof(Chunk<T>) / 16);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < nvec) {
#pragma unroll
        for (int q = 0; q < kPieces; ++q)
          cp_async16(reinterpret_cast<char*>(hb_w + i) + 16 * q,
                     static_cast<const char*>(p.h_bias) + i * sizeof(Chunk<T>) + 16 * q);
      }
    }
    cp_async_commit();
  }
  const T* x = static_cast<const T*>(p.x);
  const T* h = static_cast<const T*>(p.h);
  Chunk<T> yr[2][kIters], hr[2][kIters];  // x, then y in place
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = pair_row(pair, r);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      yr[r][k] = hr[r][k] = zero_chunk<T>();
      if (row < p.rows && i < nvec) {
        yr[r][k] = load_raw<T, kChunk>(x + row * p.cols + i * kChunk);
        hr[r][k] = load_raw<T, kChunk>(h + row * p.cols + i * kChunk);
      }
    }
  }
  uint32_t keep[kIters];
  if constexpr (kDropout) {
    const uint32_t bound = dropout_bound(d);
#pragma unroll
    for (int k = 0; k < kIters; ++k) keep[k] = keep_bits(d, bound, pair, static_cast<uint32_t>(lane + k * kWarpSize));
  }
  if (hb) cp_async_wait<0>();  // this lane's bias chunks have landed (it reads only its own)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = pair_row(pair, r);
    if (row >= p.rows) break;  // the second row of a pair past the end; uniform over the warp
    T* y = static_cast<T*>(p.y) + row * p.cols;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      float xv[kChunk], hv[kChunk];
      unpack_vec<T>(yr[r][k], xv);
      unpack_vec<T>(hr[r][k], hv);
      if (hb && i < nvec) {  // h + bias rounded to T: ops::add
        float bv[kChunk];
        unpack_vec<T>(hb_w[i], bv);
#pragma unroll
        for (int j = 0; j < kChunk; ++j) hv[j] = to_f32(from_f32<T>(__fadd_rn(hv[j], bv[j])));
      }
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        // dropout(h) rounded to T, then the add rounded: ops::dropout then ops::add. __fmul_rn
        // keeps an f32 product from being contracted into the add (an FMA would round once).
        float branch = hv[j];
        if constexpr (kDropout)
          branch = to_f32(from_f32<T>((keep[k] >> (8 * r + j)) & 1u ? __fmul_rn(hv[j], d.keep_scale) : 0.f));
        yr[r][k].v[j] = from_f32<T>(xv[j] + branch);
      }
      if (i < nvec) store_raw<T, kChunk>(y + i * kChunk, yr[r][k]);
    }
    normalise_row<T, W, kIters>(yr[r], lane, nvec, C, p.eps, static_cast<const W*>(p.weight),
                                static_cast<const W*>(p.bias), static_cast<T*>(p.z) + row * p.cols, p.mean + row,
                             p.rstd + row);
  }
}

// Shared memory of the backward vector path: the warps' rings (kBwdStages slots of kSlotRows rows
// of C, then (mean, rstd) a slot), which the warps' (2, C) fp32 sums reuse at the end, then,
// with a branch bias, each warp's fp32 sums of dh (kIters kChunk 32 >= C floats).
__host__ __device__ constexpr size_t bwd_ring_bytes(int64_t C, bool gy, size_t t_size) {
  const size_t ring = static_cast<size_t>(kBwdWarps) * kBwdStages *
                      ((gy ? 3 : 2) * static_cast<size_t>(C) * t_size + 2 * sizeof(float));
  const size_t sums = 2 * static_cast<size_t>(kBwdWarps) * C * sizeof(float);  // the warps' (2, C) sums
  return ((ring > sums ? ring : sums) + 15) / 16 * 16;
}

// Backward vector path. Block b owns row pairs [pairs * b / G, pairs * (b + 1) / G); its warp w
// takes pairs begin + w, + kBwdWarps, ..., a row at a time (row j of the warp: pair j / 2, half
// j % 2). Each warp streams its rows through a ring of kBwdStages slots in shared memory (y, gz,
// gy, mean, rstd by cp.async), kBwdStages - 1 rows ahead of the one it works on: a warp that
// loaded a row only when it got to it waited on memory twice a row at 3 blocks an SM (ncu,
// session 37, GPT-2's 16384 x 768 with gy: 55.2 us, 1.7 TB/s; with the ring 46.1 us, and 47.9 at
// the 2 blocks an SM its 176 registers gave before __launch_bounds__ asked for 3). Each lane keeps
// dweight += gz * yhat and dbias += gz for its chunks in registers; at the end the block's warps
// add theirs, in warp order, into partial row b of (G, 2C) -- (G, 3C) with the branch bias, whose
// sums of dh each lane keeps in its warp's shared row (the registers are spent): all warps' sums
// go to shared memory and each thread adds a column's in warp order (one barrier; a warp at a
// time, one barrier each, was the kernel's largest stall: 48.7 -> 41.9 us a call without the
// branch bias, 56.3 -> 45.3 with it, GPT-2's 16384 x 768 with gy, ncu session 39). The LayerNorm
// part of dy is ops/cuda/layernorm.cu's register-path formula with its order of sums.
template <class T, class W, int kIters, bool kDropout, bool kGy>
__global__ void __launch_bounds__(kBwdWarps * kWarpSize, 3)
    residual_layernorm_backward_kernel(ResidualLayerNormBackwardParams p, uint32_t pairs, float* partial) {
  constexpr int kPieces = static_cast<int>(sizeof(Chunk<T>) / 16);  // 16-byte copies a chunk
  constexpr int kSlotRows = kGy ? 3 : 2;                             // y | gz [| gy]
  DropoutParams d = p.mask;
  if constexpr (kDropout) resolve_dropout_offset(d);
  extern __shared__ float4 smem4[];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int C = static_cast<int>(p.cols);
  const int nvec = C / kChunk;
  // This warp's ring: kBwdStages slots of [y (C) | gz (C) | gy (C)], then (mean, rstd) a slot.
  T* ring = reinterpret_cast<T*>(smem4) + static_cast<int64_t>(warp) * kBwdStages * kSlotRows * C;
  float* stats = reinterpret_cast<float*>(reinterpret_cast<T*>(smem4) +
                                          static_cast<int64_t>(kBwdWarps) * kBwdStages * kSlotRows * C) +
                 warp * kBwdStages * 2;
  // With a branch bias: this warp's sums of dh, as float4s: lane l's columns
  // (l + 32 k) kChunk + 4 q .. + 3 at float4 [(k kChunk / 4 + q) 32 + l], so that a warp's access
  // is 512 consecutive bytes. Session 39, ncu against no bias: a lane's columns side by side ([c]
  // in floats, an 8-way bank conflict) +33%; float words in this order +16%; float4s +15%, most of
  // it in the end-of-kernel sums the warps took in turn (below, now in parallel: +8%).
  constexpr int kQuads = kChunk / 4;
  float4* hb_sums = p.dh_bias == nullptr ? nullptr
                                         : reinterpret_cast<float4*>(reinterpret_cast<char*>(smem4) +
                                                                     bwd_ring_bytes(C, kGy, sizeof(T))) +
                                               warp * kIters * kQuads * kWarpSize + lane;
  const T* y = static_cast<const T*>(p.y);
  const T* gz = static_cast<const T*>(p.gz);
  const T* gy = static_cast<const T*>(p.gy);
  T* dy = static_cast<T*>(p.dy);
  T* dh = static_cast<T*>(p.dh);
  if (hb_sums != nullptr) {
#pragma unroll
    for (int q = 0; q < kIters * kQuads; ++q) hb_sums[q * kWarpSize] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  ParamRaw<T, Chunk<T>, W> wr[kIters];
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    wr[k] = i < nvec ? load_param<T>(static_cast<const W*>(p.weight) + i * kChunk) : ParamRaw<T, Chunk<T>, W>{};
  }
  float dw[kIters][kChunk], db[kIters][kChunk];
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) dw[k][j] = db[k][j] = 0.f;
  }
  const uint32_t begin = static_cast<uint32_t>(static_cast<uint64_t>(pairs) * blockIdx.x / gridDim.x);
  const uint32_t end = static_cast<uint32_t>(static_cast<uint64_t>(pairs) * (blockIdx.x + 1) / gridDim.x);
  const uint32_t first = begin + warp;
  const int n = first < end ? 2 * static_cast<int>((end - first + kBwdWarps - 1) / kBwdWarps) : 0;  // rows
  auto pair_of = [&](int j) { return first + static_cast<uint32_t>(j / 2) * kBwdWarps; };
  const uint64_t policy = evict_first_policy();
  auto issue = [&](int j) {  // row j of this warp into slot j % kBwdStages; always one commit group
    const int64_t row = j < n ? pair_row(pair_of(j), j % 2) : p.rows;
    if (row < p.rows) {
      T* slot = ring + (j % kBwdStages) * kSlotRows * C;
#pragma unroll
      for (int k = 0; k < kIters; ++k) {
        const int i = lane + k * kWarpSize;
        if (i < nvec) {
#pragma unroll
          for (int q = 0; q < kPieces; ++q) {
            const int64_t at = row * p.cols + i * kChunk + q * (kChunk / kPieces);
            T* to = slot + i * kChunk + q * (kChunk / kPieces);
            cp_async16(to, y + at, policy);
            cp_async16(to + C, gz + at, policy);
            if constexpr (kGy) cp_async16(to + 2 * C, gy + at, policy);
          }
        }
      }
      if (lane == 0) {
        cp_async4(stats + (j % kBwdStages) * 2, p.mean + row);
        cp_async4(stats + (j % kBwdStages) * 2 + 1, p.rstd + row);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < kBwdStages - 1; ++j) issue(j);
  const uint32_t bound = kDropout ? dropout_bound(d) : 0u;
  uint32_t keep[kIters];
  for (int j = 0; j < n; ++j) {
    issue(j + kBwdStages - 1);
    const uint32_t pair = pair_of(j);
    const int r = j % 2;
    if constexpr (kDropout) {
      if (r == 0) {
#pragma unroll
        for (int k = 0; k < kIters; ++k) keep[k] = keep_bits(d, bound, pair, static_cast<uint32_t>(lane + k * kWarpSize));
      }
    }
    cp_async_wait<kBwdStages - 1>();  // row j has landed (for this lane); the barrier shares lane 0's stats
    __syncwarp();
    const int64_t row = pair_row(pair, r);
    if (row >= p.rows) continue;  // the last pairs' rows past the end; uniform over the warp
    const T* slot = ring + (j % kBwdStages) * kSlotRows * C;
    const float mu = stats[(j % kBwdStages) * 2], rs = stats[(j % kBwdStages) * 2 + 1];
    Chunk<T> yr[kIters], gr[kIters], gyr[kIters];
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      yr[k] = gr[k] = gyr[k] = zero_chunk<T>();
      if (i < nvec) {
        yr[k] = *reinterpret_cast<const Chunk<T>*>(slot + i * kChunk);
        gr[k] = *reinterpret_cast<const Chunk<T>*>(slot + C + i * kChunk);
        if constexpr (kGy) gyr[k] = *reinterpret_cast<const Chunk<T>*>(slot + 2 * C + i * kChunk);
      }
    }
    __syncwarp();  // every lane has read the slot before it is refilled
    float mean_g, mean_gx;
    layernorm_grad_row_sums<T>(yr, gr, wr, lane, nvec, C, mu, rs, dw, db, mean_g, mean_gx);
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < nvec) {
        float gyv[kChunk], out[kChunk];
        layernorm_grad_row_dx<T>(yr[k], gr[k], wr[k], mu, rs, mean_g, mean_gx, out);
        if constexpr (kGy) unpack_vec<T>(gyr[k], gyv);
#pragma unroll
        for (int jj = 0; jj < kChunk; ++jj) {
          // The LayerNorm gradient rounded to T, then gy added and rounded: the unfused
          // backward's dx followed by the engine's ops::add of the two contributions.
          out[jj] = to_f32(from_f32<T>(out[jj]));
          if constexpr (kGy) out[jj] = to_f32(from_f32<T>(__fadd_rn(gyv[jj], out[jj])));  // no FMA for f32
        }
        store_vec<kChunk>(dy + row * p.cols + i * kChunk, out);
        if constexpr (kDropout) {
#pragma unroll
          for (int jj = 0; jj < kChunk; ++jj) out[jj] = (keep[k] >> (8 * r + jj)) & 1u ? out[jj] * d.keep_scale : 0.f;
          store_vec<kChunk>(dh + row * p.cols + i * kChunk, out);
        }
        if (hb_sums != nullptr) {  // dh as stored (rounded to T)
#pragma unroll
          for (int q = 0; q < kQuads; ++q) {
            float4* acc = hb_sums + (k * kQuads + q) * kWarpSize;
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) v[e] = kDropout ? to_f32(from_f32<T>(out[4 * q + e])) : out[4 * q + e];
            float4 a = *acc;
            a.x += v[0];
            a.y += v[1];
            a.z += v[2];
            a.w += v[3];
            *acc = a;
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the rings are done with: their memory holds the warps' sums now
  // Every warp puts its dweight and dbias sums in shared memory ((kBwdWarps, 2, C) over the rings;
  // the dh sums are there already), then each thread adds the warps' sums of its columns in warp
  // order into the block's partial row: the order the warps took in turn before (one barrier a
  // warp; the branch bias's third row made those rounds the kernel's largest barrier stall).
  float* warp_sums = reinterpret_cast<float*>(smem4);
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
#pragma unroll
      for (int jj = 0; jj < kChunk; ++jj) {
        warp_sums[(warp * 2) * C + i * kChunk + jj] = dw[k][jj];
        warp_sums[(warp * 2 + 1) * C + i * kChunk + jj] = db[k][jj];
      }
    }
  }
  __syncthreads();
  const float* hb_all = hb_sums == nullptr ? nullptr
                                           : reinterpret_cast<const float*>(reinterpret_cast<char*>(smem4) +
                                                                            bwd_ring_bytes(C, kGy, sizeof(T)));
  const int nsums = hb_sums != nullptr ? 3 : 2;
  float* part = partial + static_cast<int64_t>(blockIdx.x) * nsums * C;
  for (int c = threadIdx.x; c < nsums * C; c += blockDim.x) {
    const int s = c / C, col = c % C;
    float v = 0.f;
    if (s < 2) {
      v = warp_sums[s * C + col];
#pragma unroll
      for (int w = 1; w < kBwdWarps; ++w) v += warp_sums[(w * 2 + s) * C + col];
    } else {  // column col of warp w's float4 sums: chunk i = col / kChunk (lane i % 32, k = i / 32)
      const int i = col / kChunk, jj = col % kChunk;
      const int at = (((i / kWarpSize) * kQuads + jj / 4) * kWarpSize + i % kWarpSize) * 4 + jj % 4;
      constexpr int kWarpFloats = kIters * kQuads * kWarpSize * 4;
      v = hb_all[at];
#pragma unroll
      for (int w = 1; w < kBwdWarps; ++w) v += hb_all[w * kWarpFloats + at];
    }
    part[c] = v;
  }
}

// y of element i of a row, recomputed wherever the scalar paths need it: rounded as the unfused
// ops round (hb, the branch bias, may be null).
template <class T, bool kDropout>
__device__ __forceinline__ float scalar_y(const T* x, const T* h, const T* hb, int64_t row, int64_t c, int64_t i,
                                          const DropoutParams& d) {
  float branch = to_f32(h[i]);
  if (hb != nullptr) branch = to_f32(from_f32<T>(__fadd_rn(branch, to_f32(hb[c]))));
  if constexpr (kDropout) {
    const bool keep = dropout_keep_at(d, 0, static_cast<uint32_t>(row), static_cast<uint32_t>(c));
    branch = to_f32(from_f32<T>(keep ? __fmul_rn(branch, d.keep_scale) : 0.f));  // no FMA with the add
  }
  return to_f32(from_f32<T>(to_f32(x[i]) + branch));
}

// Forward scalar path: one warp per row, striding over rows; lane l owns columns l + 32k.
template <class T, class W, bool kDropout>
__global__ void __launch_bounds__(kScalarThreads) residual_layernorm_forward_scalar_kernel(ResidualLayerNormForwardParams p) {
  DropoutParams d = p.mask;
  if constexpr (kDropout) resolve_dropout_offset(d);
  const int64_t C = p.cols;
  const T* x = static_cast<const T*>(p.x);
  const T* h = static_cast<const T*>(p.h);
  const T* hb = static_cast<const T*>(p.h_bias);
  const W* w = static_cast<const W*>(p.weight);
  const W* b = static_cast<const W*>(p.bias);
  T* y = static_cast<T*>(p.y);
  T* z = static_cast<T*>(p.z);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += kScalarThreads) {
      const float v = scalar_y<T, kDropout>(x, h, hb, row, c, row * C + c, d);
      y[row * C + c] = from_f32<T>(v);
      sum += v;
    }
    const float mean = warp_sum(sum) / C;
    float var = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += kScalarThreads) {
      const float dv = scalar_y<T, kDropout>(x, h, hb, row, c, row * C + c, d) - mean;
      var += dv * dv;
    }
    const float rstd = rsqrtf(warp_sum(var) / C + p.eps);
    for (int64_t c = threadIdx.x; c < C; c += kScalarThreads) {
      const float v = scalar_y<T, kDropout>(x, h, hb, row, c, row * C + c, d);
      z[row * C + c] = from_f32<T>((v - mean) * rstd * to_f32(w[c]) + to_f32(b[c]));
    }
    if (threadIdx.x == 0) {
      p.mean[row] = mean;
      p.rstd[row] = rstd;
    }
  }
}

// Backward scalar path: block b (one warp) owns rows [rows * b / G, rows * (b + 1) / G); lane l
// owns channels l + 32k, so it updates its part of partial row b of (G, 2C) -- (G, 3C) with the
// branch bias's sums of dh -- without synchronisation.
template <class T, class W, bool kDropout>
__global__ void __launch_bounds__(kScalarThreads)
    residual_layernorm_backward_scalar_kernel(ResidualLayerNormBackwardParams p, float* partial) {
  DropoutParams d = p.mask;
  if constexpr (kDropout) resolve_dropout_offset(d);
  const int64_t C = p.cols;
  const T* y = static_cast<const T*>(p.y);
  const T* gz = static_cast<const T*>(p.gz);
  const T* gy = static_cast<const T*>(p.gy);
  const W* w = static_cast<const W*>(p.weight);
  T* dy = static_cast<T*>(p.dy);
  T* dh = static_cast<T*>(p.dh);
  const bool hb = p.dh_bias != nullptr;
  float* acc = partial + static_cast<int64_t>(blockIdx.x) * (hb ? 3 : 2) * C;
  for (int64_t c = threadIdx.x; c < C; c += kScalarThreads) {
    acc[c] = acc[C + c] = 0.f;
    if (hb) acc[2 * C + c] = 0.f;
  }
  const int64_t begin = p.rows * blockIdx.x / gridDim.x, end = p.rows * (blockIdx.x + 1) / gridDim.x;
  for (int64_t row = begin; row < end; ++row) {
    const float mean = p.mean[row], rstd = p.rstd[row];
    float sum_g = 0.f, sum_gx = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += kScalarThreads) {
      const float xh = (to_f32(y[row * C + c]) - mean) * rstd;
      const float g = to_f32(gz[row * C + c]) * to_f32(w[c]);
      sum_g += g;
      sum_gx += g * xh;
    }
    const float mean_g = warp_sum(sum_g) / C;
    const float mean_gx = warp_sum(sum_gx) / C;
    for (int64_t c = threadIdx.x; c < C; c += kScalarThreads) {
      const int64_t i = row * C + c;
      const float xh = (to_f32(y[i]) - mean) * rstd;
      const float gzv = to_f32(gz[i]);
      float out = to_f32(from_f32<T>(rstd * (gzv * to_f32(w[c]) - mean_g - xh * mean_gx)));
      if (gy != nullptr) out = to_f32(from_f32<T>(__fadd_rn(to_f32(gy[i]), out)));  // no FMA for f32
      dy[i] = from_f32<T>(out);
      float dhv = out;
      if constexpr (kDropout) {
        const bool keep = dropout_keep_at(d, 0, static_cast<uint32_t>(row), static_cast<uint32_t>(c));
        dhv = to_f32(from_f32<T>(keep ? out * d.keep_scale : 0.f));
        dh[i] = from_f32<T>(dhv);
      }
      if (hb) acc[2 * C + c] += dhv;
      acc[c] += gzv * xh;
      acc[C + c] += gzv;
    }
  }
}

// Row pairs covering `rows` rows: 8 per 16-row block (rows past the end are skipped in-kernel).
uint32_t row_pairs(int64_t rows) { return static_cast<uint32_t>((rows + 15) / 16 * 8); }

// Calls fn(std::bool_constant<b>{}).
template <class Fn>
void dispatch_bool(bool b, Fn&& fn) {
  if (b) fn(std::true_type{});
  else fn(std::false_type{});
}

}  // namespace

void residual_layernorm_forward(const ResidualLayerNormForwardParams& p, Stream stream) {
  if (p.rows == 0) return;
  dispatch_cuda_float(p.dtype, "[residual_layernorm]", [&](auto tag) {
    using T = decltype(tag);
    dispatch_param_type<T>(p.param_dtype, p.dtype, "[residual_layernorm]", [&](auto wtag) {
      using W = decltype(wtag);
      constexpr size_t kAlign = sizeof(Chunk<T>), kParamAlign = sizeof(ParamRaw<T, Chunk<T>, W>);
      const bool vec_ok = p.cols % kChunk == 0 && aligned_to(p.x, kAlign) && aligned_to(p.h, kAlign) &&
                          aligned_to(p.y, kAlign) && aligned_to(p.z, kAlign) && aligned_to(p.weight, kParamAlign) &&
                          aligned_to(p.bias, kParamAlign) && (p.h_bias == nullptr || aligned_to(p.h_bias, kAlign));
      const int64_t iters = (p.cols / kChunk + kWarpSize - 1) / kWarpSize;
      dispatch_bool(p.dropout, [&](auto drop) {
        constexpr bool kDropout = decltype(drop)::value;
        const bool done = vec_ok && dispatch_iters<kMaxIters<T>>(iters, [&](auto k) {
          constexpr int kIters = decltype(k)::value;
          const uint32_t pairs = row_pairs(p.rows);
          const unsigned blocks = (pairs + kFwdWarps - 1) / kFwdWarps;
          residual_layernorm_forward_kernel<T, W, kIters, kDropout>
              <<<blocks, kFwdWarps * kWarpSize, 0, stream>>>(p, pairs);
          CUDA_CHECK_LAUNCH();
        });
        if (!done) {
          const int64_t blocks = std::min<int64_t>(p.rows, int64_t{1} << 30);
          residual_layernorm_forward_scalar_kernel<T, W, kDropout>
              <<<static_cast<unsigned>(blocks), kScalarThreads, 0, stream>>>(p);
          CUDA_CHECK_LAUNCH();
        }
      });
    });
  });
}

// The backward for activations T and parameters W: the vector path where C and the buffers allow,
// else the scalar path; then the blocks' partial sums.
template <class T, class W>
void launch_backward(const ResidualLayerNormBackwardParams& p, Stream stream) {
  const int64_t C = p.cols;
  constexpr size_t kAlign = sizeof(Chunk<T>);
  const bool vec_ok = C % kChunk == 0 && aligned_to(p.gz, kAlign) && aligned_to(p.y, kAlign) &&
                      aligned_to(p.dy, kAlign) && aligned_to(p.weight, sizeof(ParamRaw<T, Chunk<T>, W>)) &&
                      (p.gy == nullptr || aligned_to(p.gy, kAlign)) && (!p.dropout || aligned_to(p.dh, kAlign));
  const int64_t iters = (C / kChunk + kWarpSize - 1) / kWarpSize;
  // The blocks' partial sums: dweight | dbias [| dh_bias], then their totals into those outputs.
  const int sums = p.dh_bias != nullptr ? 3 : 2;
  PartialSumsOut out;
  out.out[0] = p.dweight;
  out.out[1] = p.dbias;
  out.out[2] = p.dh_bias;
  out.add[0] = p.add_dweight;
  out.add[1] = p.add_dbias;
  out.add[2] = true;
  out.seg = C;
  dispatch_bool(p.dropout, [&](auto drop) {
    constexpr bool kDropout = decltype(drop)::value;
    const bool done = vec_ok && dispatch_iters<kMaxIters<T>>(iters, [&](auto k) {
      constexpr int kIters = decltype(k)::value;
      dispatch_bool(p.gy != nullptr, [&](auto has_gy) {
        constexpr bool kGy = decltype(has_gy)::value;
        auto kernel = residual_layernorm_backward_kernel<T, W, kIters, kDropout, kGy>;
        constexpr int kThreads = kBwdWarps * kWarpSize;
        // The rings (<= 4 warps x 3 slots x 3 rows of C <= 1024 halves or 512 floats: 72 KiB),
        // later the warps' (2, C) fp32 sums; with a branch bias, the warps' sums of dh (kIters
        // kChunk 32 >= C floats each).
        const size_t smem = bwd_ring_bytes(C, kGy, sizeof(T)) +
                            (p.dh_bias != nullptr ? sizeof(float) * kBwdWarps * kIters * kChunk * kWarpSize : 0);
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        int per_sm = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
        FT_ASSERT(per_sm > 0, "[residual_layernorm_backward] kernel does not fit on an SM (", smem, " bytes)");
        const uint32_t pairs = row_pairs(p.rows);
        // One resident wave of blocks, each with at least one pair per warp.
        const int blocks = static_cast<int>(std::min<int64_t>(
            int64_t{per_sm} * sm_count(p.device), (int64_t{pairs} + kBwdWarps - 1) / kBwdWarps));
        Scratch partial(p.device, static_cast<size_t>(blocks) * sums * C * sizeof(float));
        kernel<<<blocks, kThreads, smem, stream>>>(p, pairs, static_cast<float*>(partial.ptr));
        CUDA_CHECK_LAUNCH();
        sum_partial_rows_into(static_cast<float*>(partial.ptr), blocks, sums, out, stream);
      });
    });
    if (!done) {
      const int blocks = static_cast<int>(std::min<int64_t>({p.rows, int64_t{8} * sm_count(p.device), kMaxScalarBlocks}));
      Scratch partial(p.device, static_cast<size_t>(blocks) * sums * C * sizeof(float));
      residual_layernorm_backward_scalar_kernel<T, W, kDropout>
          <<<blocks, kScalarThreads, 0, stream>>>(p, static_cast<float*>(partial.ptr));
      CUDA_CHECK_LAUNCH();
      sum_partial_rows_into(static_cast<float*>(partial.ptr), blocks, sums, out, stream);
    }
  });
}

void residual_layernorm_backward(const ResidualLayerNormBackwardParams& p, Stream stream) {
  const int64_t C = p.cols;
  if (p.rows == 0) {  // sums of no rows: zero, or nothing to add
    if (!p.add_dweight) CUDA_CHECK(cudaMemsetAsync(p.dweight, 0, C * sizeof(float), stream));
    if (!p.add_dbias) CUDA_CHECK(cudaMemsetAsync(p.dbias, 0, C * sizeof(float), stream));
    return;
  }
  dispatch_cuda_float(p.dtype, "[residual_layernorm_backward]", [&](auto tag) {
    using T = decltype(tag);
    dispatch_param_type<T>(p.param_dtype, p.dtype, "[residual_layernorm_backward]", [&](auto wtag) {
      using W = decltype(wtag);
      launch_backward<T, W>(p, stream);
    });
  });
}

}  // namespace ft::cuda
