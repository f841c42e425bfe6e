// CUDA layernorm. Two paths, picked at the launcher:
// - register path (16-byte aligned rows, C a multiple of the vector width; C <= 512 vectors in
//   the forward, C <= 1536 (halves) or 1024 (f32) in the backward): one warp per row, the row
//   held as raw 16-byte vectors, so x (and dy) are read once and y (dx) written once;
// - looping path (any C, any alignment): one block per row, scalar loads, re-reading x.
// The register paths' row arithmetic is ops/cuda/layernorm_row.cuh, which the fused residual
// kernels (ops/cuda/residual_layernorm.cu) share so that they give these results bit for bit.
//
// The backward register path is ONE cooperative launch of a persistent grid (as many blocks as
// fit at once, 1 per SM at GPT-2 small): each block takes a contiguous range of rows, each warp
// streams its rows through a cp.async ring in shared memory (3 rows ahead) and keeps dweight and
// dbias for its channels in registers; the block sums its warps in warp order into a (2, C)
// partial row; after a grid barrier, block b sums column tile b over all partial rows in block
// order. Fixed orders throughout: dweight/dbias are deterministic for a given grid size (device
// and C). x and dy are read, and dx written, with the L2 evict-first hint; the forward uses plain
// loads and stores (its evict-first version ran slower, and slowed the backward after it).
//
// Measured with bench_ops ((16384, 768) bf16, cold L2, median of 20; ratio = GB/s over the
// card's device-to-device copy bandwidth), H200, copy 4253 GB/s:
//                 before (one row per warp; bwd + reduce kernel)   after
//   fwd           0.0185 ms  0.64                                  0.0188 ms  0.63
//   bwd           0.0420 ms  0.42                                  0.0286 ms  0.62
//   fwd+bwd       0.0588 ms  0.50                                  0.0428 ms  0.69
// For scale, on the same card and clock: a bare kernel streaming x -> y (the forward's 50 MB)
// takes 0.0169-0.0179 ms (0.66-0.70), one streaming x, dy -> dx (the backward's 75 MB) 0.0234 ms
// (0.76), an empty kernel 0.0029 ms: at this size the fixed cost of each launch weighs heavily.
// The bar (0.70) needs fwd+bwd <= 0.0424 ms, 1% under what this reaches. The old forward measured
// 0.0181-0.0188 ms in the same runs: the forward is unchanged in speed. Tried on the H200 (dev bench, same method): rows dealt round-robin over
// the whole grid instead of contiguous ranges, slower (bwd 0.0299-0.0308 ms); 2 blocks of 8 warps
// per SM, slower (0.0304 vs 0.0292 ms); evict-first forward, slower (fwd+bwd 0.0482 vs 0.0453
// ms); programmatic dependent launch of the backward, no change (fwd+bwd 0.0429 ms); prefetching
// the next row in registers instead of the cp.async ring, the same (0.0294 ms; the ring needs
// fewer registers). The grid barrier and final sum cost ~1.6 us of the backward (0.0276 ms
// without them); summing 16 columns per block with 12 loads in flight per thread, instead of 32
// columns with 8, took 0.3-0.5 us off that (near the run-to-run spread).
#include "ops/cuda/layernorm.h"

#include <cooperative_groups.h>

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/cp_async.cuh"
#include "ops/cuda/layernorm_row.cuh"

namespace ft::cuda {
namespace {

constexpr int kFwdWarps = 4;  // warps per block in the forward register path
constexpr int kFwdRows = 1;   // rows per warp in the forward register path
constexpr int kLoopThreads = 256;  // threads per row in the looping paths
constexpr int kMaxLoopBlocks = 1024;
// The backward register path holds dweight, dbias (fp32) and the raw weight, x and dy vectors per
// lane: at most 6 vectors per lane for halves (C <= 1536) and 8 for f32 (C <= 1024); beyond that
// ptxas spills, so wider rows take the loop path.
template <class T>
constexpr int kBwdMaxIters = sizeof(T) == 2 ? 6 : 8;

// 16-byte accesses as raw bits; store_stream marks the line evict-first (__stcs).
__device__ __forceinline__ uint4 load16(const void* p) { return *static_cast<const uint4*>(p); }
__device__ __forceinline__ void store16(void* p, const uint4& v) { *static_cast<uint4*>(p) = v; }
__device__ __forceinline__ void store_stream(void* p, const uint4& v) { __stcs(static_cast<uint4*>(p), v); }

// A parameter vector at p (16-byte aligned; 32 for fp32 under halves): its 16 raw bytes when the
// parameters are in the activations' dtype, else its kVec floats.
template <class T, class W>
__device__ __forceinline__ ParamRaw<T, uint4, W> load_param(const W* p) {
  if constexpr (std::is_same_v<W, T>) {
    return load16(p);
  } else {
    return load_raw<W, kVecOf<T>>(p);
  }
}

template <class T>
__device__ __forceinline__ uint4 pack(const float (&f)[kVecOf<T>]) {
  Vec<T, kVecOf<T>> v;
#pragma unroll
  for (int j = 0; j < kVecOf<T>; ++j) v.v[j] = from_f32<T>(f[j]);
  uint4 u;
  memcpy(&u, &v, 16);
  return u;
}

// Forward register path: each warp normalises kRows consecutive rows, all of their loads issued
// before the first use. Lane l holds vectors l + 32k (k < kIters) of each row.
template <class T, class W, int kIters, int kWarps, int kRows>
__global__ void __launch_bounds__(kWarps * kWarpSize) layernorm_forward_warp_kernel(LayerNormForwardParams p) {
  constexpr int kVec = kVecOf<T>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarpSize) * kRows;
  if (row0 >= p.rows) return;
  const int C = static_cast<int>(p.cols);
  const int nvec = C / kVec;
  const T* x = static_cast<const T*>(p.x);
  uint4 raw[kRows][kIters];  // rows row0 + r
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      raw[r][k] = make_uint4(0, 0, 0, 0);
      if (row0 + r < p.rows && i < nvec) raw[r][k] = load16(x + (row0 + r) * p.cols + i * kVec);
    }
  }
  const W* w = static_cast<const W*>(p.weight);
  const W* b = static_cast<const W*>(p.bias);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = row0 + r;
    if (row >= p.rows) break;
    float mean, rstd;
    layernorm_row_stats<T>(raw[r], lane, nvec, C, p.eps, mean, rstd);
    T* y = static_cast<T*>(p.y) + row * p.cols;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < nvec) {
        float out[kVec];
        layernorm_row_out<T>(raw[r][k], load_param<T>(w + i * kVec), load_param<T>(b + i * kVec), mean, rstd, out);
        store16(y + i * kVec, pack<T>(out));
      }
    }
    if (lane == 0) {
      p.mean[row] = mean;
      p.rstd[row] = rstd;
    }
  }
}

// Backward register path, one cooperative launch.
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, xhat = (x - mean) * rstd.
// Block b owns rows [rows * b / G, rows * (b + 1) / G); its warp w takes rows begin + w, + kWarps,
// ... Each warp streams its rows through a ring of kStages row slots in shared memory (x, dy,
// mean, rstd by cp.async), kStages - 1 rows ahead of the one it works on. Each lane accumulates
// dweight += dy * xhat and dbias += dy for its channels in registers. Then: warps' sums ->
// shared (kWarps, 2C) -> summed in warp order into partial row b of (G, 2C); grid barrier; block
// b sums the partial rows of column tile b (16 columns) in block order, writing dweight/dbias.
template <class T, class W, int kIters, int kWarps, int kStages, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * kWarpSize, kMinBlocks)
    layernorm_backward_fused_kernel(LayerNormBackwardParams p, float* partial) {
  constexpr int kVec = kVecOf<T>;
  extern __shared__ float4 smem4[];
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int C = static_cast<int>(p.cols);
  const int nvec = C / kVec;
  // This warp's ring: kStages slots of [x (C) | dy (C)], then (mean, rstd) per slot.
  T* ring = reinterpret_cast<T*>(smem4) + static_cast<int64_t>(warp) * kStages * 2 * C;
  float* stats = reinterpret_cast<float*>(reinterpret_cast<T*>(smem4) + static_cast<int64_t>(kWarps) * kStages * 2 * C) +
                 warp * kStages * 2;
  const T* x = static_cast<const T*>(p.x);
  const T* dy = static_cast<const T*>(p.dy);
  T* dx = static_cast<T*>(p.dx);
  ParamRaw<T, uint4, W> wr[kIters];
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    wr[k] = i < nvec ? load_param<T>(static_cast<const W*>(p.weight) + i * kVec) : ParamRaw<T, uint4, W>{};
  }
  float dw[kIters][kVec], db[kIters][kVec];
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) dw[k][j] = db[k][j] = 0.f;
  }
  // This warp's rows: first + j * kWarps, j < n, inside the block's range [begin, end).
  const int64_t first = p.rows * blockIdx.x / gridDim.x + warp, end = p.rows * (blockIdx.x + 1) / gridDim.x;
  const int n = first < end ? static_cast<int>((end - first + kWarps - 1) / kWarps) : 0;
  const uint64_t policy = evict_first_policy();
  auto issue = [&](int j) {  // row j of this warp into slot j % kStages; always one commit group
    if (j < n) {
      const int64_t row = first + static_cast<int64_t>(j) * kWarps;
      T* slot = ring + (j % kStages) * 2 * C;
#pragma unroll
      for (int k = 0; k < kIters; ++k) {
        const int i = lane + k * kWarpSize;
        if (i < nvec) {
          cp_async16(slot + i * kVec, x + row * p.cols + i * kVec, policy);
          cp_async16(slot + C + i * kVec, dy + row * p.cols + i * kVec, policy);
        }
      }
      if (lane == 0) {
        cp_async4(stats + (j % kStages) * 2, p.mean + row);
        cp_async4(stats + (j % kStages) * 2 + 1, p.rstd + row);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) issue(j);
  for (int j = 0; j < n; ++j) {
    issue(j + kStages - 1);
    cp_async_wait<kStages - 1>();  // row j has landed (for this lane); the barrier shares lane 0's stats
    __syncwarp();
    const T* slot = ring + (j % kStages) * 2 * C;
    const float mu = stats[(j % kStages) * 2], rs = stats[(j % kStages) * 2 + 1];
    uint4 xr[kIters], dr[kIters];
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      xr[k] = dr[k] = make_uint4(0, 0, 0, 0);
      if (i < nvec) {
        xr[k] = *reinterpret_cast<const uint4*>(slot + i * kVec);
        dr[k] = *reinterpret_cast<const uint4*>(slot + C + i * kVec);
      }
    }
    __syncwarp();  // every lane has read the slot before lane 0 refills its stats
    float mean_g, mean_gx;
    layernorm_grad_row_sums<T>(xr, dr, wr, lane, nvec, C, mu, rs, dw, db, mean_g, mean_gx);
    const int64_t row = first + static_cast<int64_t>(j) * kWarps;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < nvec) {
        float out[kVec];
        layernorm_grad_row_dx<T>(xr[k], dr[k], wr[k], mu, rs, mean_g, mean_gx, out);
        store_stream(dx + row * p.cols + i * kVec, pack<T>(out));
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the rings are done with: reuse their memory for the block's sums
  float* red = reinterpret_cast<float*>(smem4);  // (kWarps, 2C)
  float* mine = red + static_cast<int64_t>(warp) * 2 * C;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
#pragma unroll
      for (int j = 0; j < kVec; j += 4) {
        *reinterpret_cast<float4*>(mine + i * kVec + j) = make_float4(dw[k][j], dw[k][j + 1], dw[k][j + 2], dw[k][j + 3]);
        *reinterpret_cast<float4*>(mine + C + i * kVec + j) = make_float4(db[k][j], db[k][j + 1], db[k][j + 2], db[k][j + 3]);
      }
    }
  }
  __syncthreads();
  float* part = partial + static_cast<int64_t>(blockIdx.x) * 2 * C;
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) {
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) s += red[w * 2 * C + c];
    part[c] = s;
  }
  __threadfence();
  cooperative_groups::this_grid().sync();
  // Column tile t: 16 columns of the (G, 2C) partials. Thread group g (of kGroups) sums partial
  // rows g, g + kGroups, ... in order, kLoads loads in flight; then the groups are summed in order.
  constexpr int kTileCols = 16, kGroups = kWarps * kWarpSize / kTileCols, kLoads = 12;
  float* tile = red;  // (kGroups, kTileCols); every thread is past its reads of red (grid barrier)
  const int col = threadIdx.x % kTileCols, group = threadIdx.x / kTileCols;
  const int G = gridDim.x;
  const int tiles = (2 * C + kTileCols - 1) / kTileCols;
  for (int t = blockIdx.x; t < tiles; t += G) {
    const int c = t * kTileCols + col;
    float s = 0.f;
    if (c < 2 * C) {
      for (int b0 = group; b0 < G; b0 += kGroups * kLoads) {
        float v[kLoads];
#pragma unroll
        for (int q = 0; q < kLoads; ++q) {
          const int b = b0 + q * kGroups;
          v[q] = b < G ? __ldcg(partial + static_cast<int64_t>(b) * 2 * C + c) : 0.f;
        }
#pragma unroll
        for (int q = 0; q < kLoads; ++q) s += v[q];
      }
    }
    tile[group * kTileCols + col] = s;
    __syncthreads();
    if (group == 0 && c < 2 * C) {
      float total = 0.f;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) total += tile[g * kTileCols + col];
      if (c < C) {
        p.dweight[c] = p.add_dweight ? p.dweight[c] + total : total;
      } else {
        p.dbias[c - C] = p.add_dbias ? p.dbias[c - C] + total : total;
      }
    }
    __syncthreads();
  }
}

// Backward register path configuration: 8 warps, rows kStages - 1 ahead. The rings take
// kWarps * kStages * 2C elements of shared memory: 4 slots for halves (<= 192 KiB up to C = 1536),
// 3 for f32 (<= 192 KiB up to C = 1024).
template <class T>
struct BwdConfig {
  static constexpr int kWarps = 8;
  static constexpr int kStages = sizeof(T) == 2 ? 4 : 3;
  static constexpr int kMinBlocks = 1;
};

template <class T, class W>
__global__ void __launch_bounds__(kLoopThreads) layernorm_forward_loop_kernel(LayerNormForwardParams p) {
  __shared__ float scratch[kWarpSize];
  const int64_t C = p.cols;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * C;
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += to_f32(x[c]);
    const float mean = block_sum(sum, scratch) / C;
    float var = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float d = to_f32(x[c]) - mean;
      var += d * d;
    }
    const float rstd = rsqrtf(block_sum(var, scratch) / C + p.eps);
    const W* w = static_cast<const W*>(p.weight);
    const W* b = static_cast<const W*>(p.bias);
    T* y = static_cast<T*>(p.y) + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      y[c] = from_f32<T>((to_f32(x[c]) - mean) * rstd * to_f32(w[c]) + to_f32(b[c]));
    if (threadIdx.x == 0) {
      p.mean[row] = mean;
      p.rstd[row] = rstd;
    }
  }
}

// Any C, any alignment: one block per row (striding over rows). Thread t owns channels
// c = t (mod blockDim) in every loop, so it updates its part of the block's partial (2, C) row in
// global memory without synchronisation.
template <class T, class W>
__global__ void __launch_bounds__(kLoopThreads) layernorm_backward_loop_kernel(LayerNormBackwardParams p, float* partial) {
  __shared__ float scratch[kWarpSize];
  const int64_t C = p.cols;
  const W* w = static_cast<const W*>(p.weight);
  float* acc = partial + static_cast<int64_t>(blockIdx.x) * 2 * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) acc[c] = acc[C + c] = 0.f;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * C;
    const T* dy = static_cast<const T*>(p.dy) + row * C;
    const float mean = p.mean[row], rstd = p.rstd[row];
    float sum_g = 0.f, sum_gx = 0.f;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float xh = (to_f32(x[c]) - mean) * rstd;
      const float g = to_f32(dy[c]) * to_f32(w[c]);
      sum_g += g;
      sum_gx += g * xh;
    }
    const float mean_g = block_sum(sum_g, scratch) / C;
    const float mean_gx = block_sum(sum_gx, scratch) / C;
    T* dx = static_cast<T*>(p.dx) + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float xh = (to_f32(x[c]) - mean) * rstd;
      const float dyv = to_f32(dy[c]);
      dx[c] = from_f32<T>(rstd * (dyv * to_f32(w[c]) - mean_g - xh * mean_gx));
      acc[c] += dyv * xh;
      acc[C + c] += dyv;
    }
  }
}

}  // namespace

void layernorm_forward(const LayerNormForwardParams& p, Stream stream) {
  if (p.rows == 0) return;
  dispatch_cuda_float(p.dtype, "[layernorm_forward]", [&](auto tag) {
    using T = decltype(tag);
    dispatch_param_type<T>(p.param_dtype, p.dtype, "[layernorm_forward]", [&](auto wtag) {
      using W = decltype(wtag);
      constexpr int kVec = kVecOf<T>;
      constexpr int kWarps = kFwdWarps, kRows = kFwdRows;
      const bool vec_ok = p.cols % kVec == 0 && aligned16(p.x) && aligned16(p.y) &&
                          aligned_to(p.weight, kVec * sizeof(W)) && aligned_to(p.bias, kVec * sizeof(W));
      const int64_t iters = (p.cols / kVec + kWarpSize - 1) / kWarpSize;
      const bool done = vec_ok && dispatch_iters<16>(iters, [&](auto k) {
        constexpr int kIters = decltype(k)::value;
        const int64_t blocks = (p.rows + kWarps * kRows - 1) / (kWarps * kRows);
        layernorm_forward_warp_kernel<T, W, kIters, kWarps, kRows>
            <<<static_cast<unsigned>(blocks), kWarps * kWarpSize, 0, stream>>>(p);
        CUDA_CHECK_LAUNCH();
      });
      if (!done) {
        const int64_t blocks = std::min<int64_t>(p.rows, int64_t{1} << 30);
        layernorm_forward_loop_kernel<T, W><<<static_cast<unsigned>(blocks), kLoopThreads, 0, stream>>>(p);
        CUDA_CHECK_LAUNCH();
      }
    });
  });
}

// Launches layernorm_backward_fused_kernel as a cooperative grid of as many blocks as fit on the
// device at once (at most one per kWarps rows).
template <class T, class W, int kIters, int kWarps, int kStages, int kMinBlocks>
void launch_backward_fused(const LayerNormBackwardParams& p, Stream stream) {
  auto kernel = layernorm_backward_fused_kernel<T, W, kIters, kWarps, kStages, kMinBlocks>;
  constexpr int kThreads = kWarps * kWarpSize;
  const size_t ring = static_cast<size_t>(kWarps) * kStages * (2 * p.cols * sizeof(T) + 2 * sizeof(float));
  const size_t smem = std::max(ring, static_cast<size_t>(kWarps) * 2 * p.cols * sizeof(float));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
  FT_ASSERT(per_sm > 0, "[layernorm_backward] kernel does not fit on an SM (", smem, " bytes of shared memory)");
  const int64_t blocks = std::min<int64_t>(int64_t{per_sm} * sm_count(p.device), (p.rows + kWarps - 1) / kWarps);
  Scratch partial(p.device, static_cast<size_t>(blocks) * 2 * p.cols * sizeof(float));
  LayerNormBackwardParams args_p = p;
  float* args_partial = static_cast<float*>(partial.ptr);
  void* args[] = {&args_p, &args_partial};
  CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(static_cast<unsigned>(blocks)),
                                         dim3(kThreads), args, smem, stream));
}

void layernorm_backward(const LayerNormBackwardParams& p, Stream stream) {
  const int64_t C = p.cols;
  if (p.rows == 0) {  // sums of no rows: zero, or nothing to add
    if (!p.add_dweight) CUDA_CHECK(cudaMemsetAsync(p.dweight, 0, C * sizeof(float), stream));
    if (!p.add_dbias) CUDA_CHECK(cudaMemsetAsync(p.dbias, 0, C * sizeof(float), stream));
    return;
  }
  dispatch_cuda_float(p.dtype, "[layernorm_backward]", [&](auto tag) {
    using T = decltype(tag);
    dispatch_param_type<T>(p.param_dtype, p.dtype, "[layernorm_backward]", [&](auto wtag) {
      using W = decltype(wtag);
      constexpr int kVec = kVecOf<T>;
      const bool vec_ok = C % kVec == 0 && aligned16(p.x) && aligned16(p.dy) && aligned16(p.dx) &&
                          aligned_to(p.weight, kVec * sizeof(W));
      const int64_t iters = (C / kVec + kWarpSize - 1) / kWarpSize;
      const bool done = vec_ok && dispatch_iters<kBwdMaxIters<T>>(iters, [&](auto k) {
        constexpr int kIters = decltype(k)::value;
        using Cfg = BwdConfig<T>;
        launch_backward_fused<T, W, kIters, Cfg::kWarps, Cfg::kStages, Cfg::kMinBlocks>(p, stream);
      });
      if (!done) {
        const int sms = sm_count(p.device);
        const int blocks = static_cast<int>(std::min<int64_t>({p.rows, int64_t{4} * sms, kMaxLoopBlocks}));
        Scratch partial(p.device, static_cast<size_t>(blocks) * 2 * C * sizeof(float));
        layernorm_backward_loop_kernel<T, W><<<blocks, kLoopThreads, 0, stream>>>(p, static_cast<float*>(partial.ptr));
        CUDA_CHECK_LAUNCH();
        sum_partial_rows_split(static_cast<float*>(partial.ptr), blocks, C, p.dweight, p.dbias, p.add_dweight,
                                  p.add_dbias, stream);
      }
    });
  });
}

}  // namespace ft::cuda
