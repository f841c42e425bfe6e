// The LayerNorm row code shared by the register-path kernels of ops/cuda/layernorm.cu and
// ops/cuda/residual_layernorm.cu, so that the fused residual kernels give the plain LayerNorm's
// results bit for bit: same order of sums, same expressions (hence the same contractions into
// FMAs). A warp holds a row as kIters raw vectors R per lane -- vector lane + 32k, each R holding
// sizeof(R) / sizeof(T) consecutive elements (uint4, or Vec<T, 8>) -- and works in fp32.
//
// The LayerNorm parameters (weight, bias) are raw vectors of their own type WR: the activations'
// R when they share T, or Vec<float, kN> when fp32 parameters meet half activations (a model that
// keeps its LayerNorms in fp32, nn::LayerNorm). Either way the arithmetic is the same fp32.
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

// Parameters of type W for activations of type T held as R: R itself, or kN floats.
template <class T, class R, class W>
using ParamRaw = std::conditional_t<std::is_same_v<W, T>, R, Vec<W, kElemsOf<T, R>>>;

// A parameter vector as kN floats: R's bits unpacked as T, or the floats themselves.
template <class T, class R, class WR>
__device__ __forceinline__ void unpack_param(const WR& raw, float (&f)[kElemsOf<T, R>]) {
  if constexpr (std::is_same_v<WR, R>) {
    unpack_vec<T>(raw, f);
  } else {
    static_assert(std::is_same_v<WR, Vec<float, kElemsOf<T, R>>>, "parameters are T or fp32");
#pragma unroll
    for (int j = 0; j < kElemsOf<T, R>; ++j) f[j] = raw.v[j];
  }
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
template <class T, class R, class WR>
__device__ __forceinline__ void layernorm_row_out(const R& x, const WR& w, const WR& b, float mean, float rstd,
                                                  float (&out)[kElemsOf<T, R>]) {
  constexpr int kN = kElemsOf<T, R>;
  float v[kN], wv[kN], bv[kN];
  unpack_vec<T>(x, v);
  unpack_param<T, R>(w, wv);
  unpack_param<T, R>(b, bv);
#pragma unroll
  for (int j = 0; j < kN; ++j) out[j] = (v[j] - mean) * rstd * wv[j] + bv[j];
}

// The backward's row sums, with g = dy * w and xhat = (x - mu) * rs: mean_g = mean(g) and
// mean_gx = mean(g * xhat) over the row; and the lane's dweight += dy * xhat, dbias += dy.
template <class T, int kIters, class R, class WR>
__device__ __forceinline__ void layernorm_grad_row_sums(const R (&x)[kIters], const R (&dy)[kIters],
                                                        const WR (&w)[kIters], int lane, int nvec, int C, float mu,
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
      unpack_param<T, R>(w[k], wv);
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
template <class T, class R, class WR>
__device__ __forceinline__ void layernorm_grad_row_dx(const R& x, const R& dy, const WR& w, float mu, float rs,
                                                      float mean_g, float mean_gx, float (&out)[kElemsOf<T, R>]) {
  constexpr int kN = kElemsOf<T, R>;
  float xv[kN], dv[kN], wv[kN];
  unpack_vec<T>(x, xv);
  unpack_vec<T>(dy, dv);
  unpack_param<T, R>(w, wv);
#pragma unroll
  for (int j = 0; j < kN; ++j) out[j] = rs * (dv[j] * wv[j] - mean_g - (xv[j] - mu) * rs * mean_gx);
}

// Host side: calls fn(W{}) with W the parameters' element type for activations of type T (dtype
// x): T when the parameters are in x's dtype, float when they are f32 under bf16 / f16.
template <class T, class Fn>
void dispatch_param_type(DType param, DType x, const char* op, Fn&& fn) {
  if (param == x) {
    fn(T{});
    return;
  }
  FT_CHECK_ARG(param == DType::F32 && (x == DType::BF16 || x == DType::F16), op, " the parameters are ", param,
               " but x is ", x, " (expected x's dtype, or f32 under bf16 / f16)");
  if constexpr (sizeof(T) == 2) fn(float{});
}

}  // namespace ft::cuda
