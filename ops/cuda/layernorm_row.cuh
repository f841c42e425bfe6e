// The LayerNorm row code shared by the register-path kernels of ops/cuda/layernorm.cu and
// ops/cuda/residual_layernorm.cu, so that the fused residual kernels give the plain LayerNorm's
// results bit for bit: same order of sums, same expressions (hence the same contractions into
// FMAs). A warp holds a row as kIters raw vectors R per lane -- vector lane + 32k, each R holding
// sizeof(R) / sizeof(T) consecutive elements (uint4, or Vec<T, 8>) -- and works in fp32.
//
// The second stage of the dweight/dbias sums both backward passes use -- (blocks, 2C) fp32 partial
// rows summed over blocks in a fixed order -- is ops/cuda/partial_sums.cuh's, included here.
#pragma once

#include "ops/cuda/partial_sums.cuh"
#include "ops/cuda/row_utils.cuh"

namespace ft::cuda {

// Elements of T in a raw vector R.
template <class T, class R>
constexpr int kElemsOf = static_cast<int>(sizeof(R) / sizeof(T));

template <class T, class R>
__device__ __forceinline__ void unpack_vec(const R& raw, float (&f)[kElemsOf<T, R>]) {
  Vec<T, kElemsOf<T, R>> v;
  memcpy(&v, &raw, sizeof(R));
#pragma unroll
  for (int j = 0; j < kElemsOf<T, R>; ++j) f[j] = to_f32(v.v[j]);
}

// Calls fn(v) for each element v of the lane's vectors lane + 32k < nvec of a row, in vector then
// element order.
template <class T, int kIters, class R, class Fn>
__device__ __forceinline__ void for_each_lane_value(const R (&raw)[kIters], int lane, int nvec, Fn&& fn) {
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    if (lane + k * kWarpSize < nvec) {
      float v[kElemsOf<T, R>];
      unpack_vec<T>(raw[k], v);
#pragma unroll
      for (int j = 0; j < kElemsOf<T, R>; ++j) fn(v[j]);
    }
  }
}

// mean and rstd = 1 / sqrt(var + eps) of a row of C elements held as vectors lane + 32k < nvec:
// per-lane sums in vector then element order, a butterfly warp sum, two-pass variance from
// registers (no cancellation).
template <class T, int kIters, class R>
__device__ __forceinline__ void layernorm_row_stats(const R (&raw)[kIters], int lane, int nvec, int C, float eps,
                                                    float& mean, float& rstd) {
  float sum = 0.f;
  for_each_lane_value<T>(raw, lane, nvec, [&](float v) { sum += v; });
  mean = warp_sum(sum) / C;
  float var = 0.f;
  for_each_lane_value<T>(raw, lane, nvec, [&](float v) {
    const float d = v - mean;
    var += d * d;
  });
  rstd = rsqrtf(warp_sum(var) / C + eps);
}

// The normalised output of one vector: (x - mean) * rstd * w + b.
template <class T, class R>
__device__ __forceinline__ void layernorm_row_out(const R& x, const R& w, const R& b, float mean, float rstd,
                                                  float (&out)[kElemsOf<T, R>]) {
  constexpr int kN = kElemsOf<T, R>;
  float v[kN], wv[kN], bv[kN];
  unpack_vec<T>(x, v);
  unpack_vec<T>(w, wv);
  unpack_vec<T>(b, bv);
#pragma unroll
  for (int j = 0; j < kN; ++j) out[j] = (v[j] - mean) * rstd * wv[j] + bv[j];
}

// The backward's row sums, with g = dy * w and xhat = (x - mu) * rs: mean_g = mean(g) and
// mean_gx = mean(g * xhat) over the row; and the lane's dweight += dy * xhat, dbias += dy.
template <class T, int kIters, class R>
__device__ __forceinline__ void layernorm_grad_row_sums(const R (&x)[kIters], const R (&dy)[kIters],
                                                        const R (&w)[kIters], int lane, int nvec, int C, float mu,
                                                        float rs, float (&dw)[kIters][kElemsOf<T, R>],
                                                        float (&db)[kIters][kElemsOf<T, R>], float& mean_g,
                                                        float& mean_gx) {
  constexpr int kN = kElemsOf<T, R>;
  float sum_g = 0.f, sum_gx = 0.f;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    if (lane + k * kWarpSize < nvec) {
      float xv[kN], dv[kN], wv[kN];
      unpack_vec<T>(x[k], xv);
      unpack_vec<T>(dy[k], dv);
      unpack_vec<T>(w[k], wv);
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const float xh = (xv[j] - mu) * rs;
        const float g = dv[j] * wv[j];
        sum_g += g;
        sum_gx += g * xh;
        dw[k][j] += dv[j] * xh;
        db[k][j] += dv[j];
      }
    }
  }
  mean_g = warp_sum(sum_g) / C;
  mean_gx = warp_sum(sum_gx) / C;
}

// dx of one vector: rs * (g - mean_g - xhat * mean_gx).
template <class T, class R>
__device__ __forceinline__ void layernorm_grad_row_dx(const R& x, const R& dy, const R& w, float mu, float rs,
                                                      float mean_g, float mean_gx, float (&out)[kElemsOf<T, R>]) {
  constexpr int kN = kElemsOf<T, R>;
  float xv[kN], dv[kN], wv[kN];
  unpack_vec<T>(x, xv);
  unpack_vec<T>(dy, dv);
  unpack_vec<T>(w, wv);
#pragma unroll
  for (int j = 0; j < kN; ++j) out[j] = rs * (dv[j] * wv[j] - mean_g - (xv[j] - mu) * rs * mean_gx);
}

}  // namespace ft::cuda
