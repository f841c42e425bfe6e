// CUDA layernorm. Two paths, picked at the launcher:
// - register path (16-byte aligned rows, C a multiple of the vector width, C <= 512 vectors in
//   the forward and C <= 1536 in the backward):
//   one warp per row, the row held in registers, so x is read once and y written once;
// - looping path (any C, any alignment): one block per row, scalar loads, re-reading x.
// The backward reduces dweight/dbias in two stages without atomics: each block sums its rows
// into a (2, C) partial, then a second kernel sums the partials in block order (deterministic).
#include "ops/cuda/layernorm.h"

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {
namespace {

constexpr int kFwdWarps = 4;       // rows per block in the forward register path
constexpr int kBwdWarps = 4;       // warps per block in the backward register path
constexpr int kLoopThreads = 256;  // threads per row in the looping paths
constexpr int kMaxLoopBlocks = 1024;
// The backward register path holds x-hat, dy*w, dweight and dbias per lane: 4 * kIters * kVec
// floats. Beyond 48 elements per lane (C > 1536) ptxas spills, so wider rows take the loop path.
constexpr int kBwdMaxElems = 48;

template <class T, int kIters>
__global__ void __launch_bounds__(kFwdWarps * kWarpSize) layernorm_forward_warp_kernel(LayerNormForwardParams p) {
  constexpr int kVec = kVecOf<T>;
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kFwdWarps + threadIdx.x / kWarpSize;
  if (row >= p.rows) return;
  const int C = static_cast<int>(p.cols);
  const int nvec = C / kVec;
  const T* x = static_cast<const T*>(p.x) + row * p.cols;  // (C)
  float v[kIters][kVec];                                    // lane's vectors lane + 32k
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
      load_vec<kVec>(x + i * kVec, v[k]);
#pragma unroll
      for (int j = 0; j < kVec; ++j) sum += v[k][j];
    }
  }
  const float mean = warp_sum(sum) / C;
  float var = 0.f;  // two-pass variance from registers: no cancellation
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    if (lane + k * kWarpSize < nvec) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float d = v[k][j] - mean;
        var += d * d;
      }
    }
  }
  const float rstd = rsqrtf(warp_sum(var) / C + p.eps);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y) + row * p.cols;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = lane + k * kWarpSize;
    if (i < nvec) {
      float wv[kVec], bv[kVec], out[kVec];
      load_vec<kVec>(w + i * kVec, wv);
      load_vec<kVec>(b + i * kVec, bv);
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[j] = (v[k][j] - mean) * rstd * wv[j] + bv[j];
      store_vec<kVec>(y + i * kVec, out);
    }
  }
  if (lane == 0) {
    p.mean[row] = mean;
    p.rstd[row] = rstd;
  }
}

template <class T>
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
    const T* w = static_cast<const T*>(p.weight);
    const T* b = static_cast<const T*>(p.bias);
    T* y = static_cast<T*>(p.y) + row * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
      y[c] = from_f32<T>((to_f32(x[c]) - mean) * rstd * to_f32(w[c]) + to_f32(b[c]));
    if (threadIdx.x == 0) {
      p.mean[row] = mean;
      p.rstd[row] = rstd;
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, xhat = (x - mean) * rstd.
// Each lane accumulates dweight += dy * xhat and dbias += dy for its channels in registers over
// the rows its warp visits; the block's warps are then summed in warp order into shared memory
// (2 * C floats, dynamic) and written as this block's partial (2, C) row.
template <class T, int kIters>
__global__ void __launch_bounds__(kBwdWarps * kWarpSize) layernorm_backward_warp_kernel(LayerNormBackwardParams p, float* partial) {
  constexpr int kVec = kVecOf<T>;
  extern __shared__ float block_acc[];  // (2, C): dweight then dbias
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int C = static_cast<int>(p.cols);
  const int nvec = C / kVec;
  const T* w = static_cast<const T*>(p.weight);
  float dw[kIters][kVec], db[kIters][kVec];
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
#pragma unroll
    for (int j = 0; j < kVec; ++j) dw[k][j] = db[k][j] = 0.f;
  }
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kBwdWarps + warp; row < p.rows;
       row += static_cast<int64_t>(gridDim.x) * kBwdWarps) {
    const T* x = static_cast<const T*>(p.x) + row * p.cols;
    const T* dy = static_cast<const T*>(p.dy) + row * p.cols;
    const float mean = p.mean[row], rstd = p.rstd[row];
    float xh[kIters][kVec], g[kIters][kVec];
    float sum_g = 0.f, sum_gx = 0.f;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < nvec) {
        float dyv[kVec], wv[kVec];
        load_vec<kVec>(x + i * kVec, xh[k]);
        load_vec<kVec>(dy + i * kVec, dyv);
        load_vec<kVec>(w + i * kVec, wv);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          xh[k][j] = (xh[k][j] - mean) * rstd;
          g[k][j] = dyv[j] * wv[j];
          dw[k][j] += dyv[j] * xh[k][j];
          db[k][j] += dyv[j];
          sum_g += g[k][j];
          sum_gx += g[k][j] * xh[k][j];
        }
      }
    }
    const float mean_g = warp_sum(sum_g) / C;
    const float mean_gx = warp_sum(sum_gx) / C;
    T* dx = static_cast<T*>(p.dx) + row * p.cols;
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      const int i = lane + k * kWarpSize;
      if (i < nvec) {
        float out[kVec];
#pragma unroll
        for (int j = 0; j < kVec; ++j) out[j] = rstd * (g[k][j] - mean_g - xh[k][j] * mean_gx);
        store_vec<kVec>(dx + i * kVec, out);
      }
    }
  }
  for (int w_turn = 0; w_turn < kBwdWarps; ++w_turn) {  // fixed order: deterministic sums
    if (warp == w_turn) {
#pragma unroll
      for (int k = 0; k < kIters; ++k) {
        const int i = lane + k * kWarpSize;
        if (i < nvec) {
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const int c = i * kVec + j;
            block_acc[c] = (w_turn == 0 ? 0.f : block_acc[c]) + dw[k][j];
            block_acc[C + c] = (w_turn == 0 ? 0.f : block_acc[C + c]) + db[k][j];
          }
        }
      }
    }
    __syncthreads();
  }
  float* out = partial + static_cast<int64_t>(blockIdx.x) * 2 * C;
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) out[c] = block_acc[c];
}

// Any C, any alignment: one block per row (striding over rows). Thread t owns channels
// c = t (mod blockDim) in every loop, so it updates its part of the block's partial (2, C) row in
// global memory without synchronisation.
template <class T>
__global__ void __launch_bounds__(kLoopThreads) layernorm_backward_loop_kernel(LayerNormBackwardParams p, float* partial) {
  __shared__ float scratch[kWarpSize];
  const int64_t C = p.cols;
  const T* w = static_cast<const T*>(p.weight);
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

// Sums the (blocks, 2, C) partials over blocks: 32 channels per block, 32 row groups summed in a
// fixed order through shared memory. Deterministic for a given number of blocks.
constexpr int kReduceCols = 32, kReduceGroups = 32;
__global__ void __launch_bounds__(kReduceCols * kReduceGroups) layernorm_backward_reduce_kernel(
    const float* partial, int blocks, int64_t C, float* dweight, float* dbias) {
  __shared__ float sums[kReduceGroups][kReduceCols + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kReduceCols + threadIdx.x;  // in [0, 2C)
  float s = 0.f;
  if (c < 2 * C) {
#pragma unroll 4
    for (int b = threadIdx.y; b < blocks; b += kReduceGroups) s += partial[static_cast<int64_t>(b) * 2 * C + c];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < 2 * C) {
    float total = 0.f;
    for (int g = 0; g < kReduceGroups; ++g) total += sums[g][threadIdx.x];
    if (c < C) {
      dweight[c] = total;
    } else {
      dbias[c - C] = total;
    }
  }
}

}  // namespace

void layernorm_forward(const LayerNormForwardParams& p, Stream stream) {
  if (p.rows == 0) return;
  dispatch_cuda_float(p.dtype, "[layernorm_forward]", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const bool vec_ok = p.cols % kVec == 0 && aligned16(p.x) && aligned16(p.y) && aligned16(p.weight) && aligned16(p.bias);
    const int64_t iters = (p.cols / kVec + kWarpSize - 1) / kWarpSize;
    const bool done = vec_ok && dispatch_iters<16>(iters, [&](auto k) {
      constexpr int kIters = decltype(k)::value;
      const int64_t blocks = (p.rows + kFwdWarps - 1) / kFwdWarps;
      layernorm_forward_warp_kernel<T, kIters><<<static_cast<unsigned>(blocks), kFwdWarps * kWarpSize, 0, stream>>>(p);
      CUDA_CHECK_LAUNCH();
    });
    if (!done) {
      const int64_t blocks = std::min<int64_t>(p.rows, int64_t{1} << 30);
      layernorm_forward_loop_kernel<T><<<static_cast<unsigned>(blocks), kLoopThreads, 0, stream>>>(p);
      CUDA_CHECK_LAUNCH();
    }
  });
}

void layernorm_backward(const LayerNormBackwardParams& p, Stream stream) {
  const int64_t C = p.cols;
  if (p.rows == 0) {
    CUDA_CHECK(cudaMemsetAsync(p.dweight, 0, C * sizeof(float), stream));
    CUDA_CHECK(cudaMemsetAsync(p.dbias, 0, C * sizeof(float), stream));
    return;
  }
  dispatch_cuda_float(p.dtype, "[layernorm_backward]", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = kVecOf<T>;
    const bool vec_ok = C % kVec == 0 && aligned16(p.x) && aligned16(p.dy) && aligned16(p.dx) && aligned16(p.weight);
    const int64_t iters = (C / kVec + kWarpSize - 1) / kWarpSize;
    const int sms = sm_count(p.device);
    int blocks = 0;
    auto reduce = [&](const float* partial) {
      const dim3 block(kReduceCols, kReduceGroups);
      const int64_t grid = (2 * C + kReduceCols - 1) / kReduceCols;
      layernorm_backward_reduce_kernel<<<static_cast<unsigned>(grid), block, 0, stream>>>(partial, blocks, C, p.dweight, p.dbias);
      CUDA_CHECK_LAUNCH();
    };
    const bool done = vec_ok && dispatch_iters<kBwdMaxElems / kVec>(iters, [&](auto k) {
      constexpr int kIters = decltype(k)::value;
      auto kernel = layernorm_backward_warp_kernel<T, kIters>;
      const size_t smem = 2 * C * sizeof(float);
      int per_sm = 0;
      CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBwdWarps * kWarpSize, smem));
      // Fill the card once; more blocks would only add partial rows to reduce.
      blocks = static_cast<int>(std::min<int64_t>(int64_t{std::max(per_sm, 1)} * sms, (p.rows + kBwdWarps - 1) / kBwdWarps));
      Scratch partial(p.device, static_cast<size_t>(blocks) * 2 * C * sizeof(float));
      kernel<<<blocks, kBwdWarps * kWarpSize, smem, stream>>>(p, static_cast<float*>(partial.ptr));
      CUDA_CHECK_LAUNCH();
      reduce(static_cast<float*>(partial.ptr));
    });
    if (!done) {
      blocks = static_cast<int>(std::min<int64_t>({p.rows, int64_t{4} * sms, kMaxLoopBlocks}));
      Scratch partial(p.device, static_cast<size_t>(blocks) * 2 * C * sizeof(float));
      layernorm_backward_loop_kernel<T><<<blocks, kLoopThreads, 0, stream>>>(p, static_cast<float*>(partial.ptr));
      CUDA_CHECK_LAUNCH();
      reduce(static_cast<float*>(partial.ptr));
    }
  });
}

}  // namespace ft::cuda
