// The FP8 attention's quantiser: bf16 (B, T, H, D) rows -> e4m3 tile images + fp32 scales
// (ops/attention_fp8_params.h), optionally rotating Q and K by a sign-flipped Walsh-Hadamard matrix
// along D first. The arithmetic is ops/cpu/attention_fp8_reference.cpp's fp8_quantize, operation
// for operation (explicit _rn intrinsics: no contraction), so the CPU emulation reproduces the bytes.
//
// One CTA of 16 warps per tile of kTileRows rows of one (batch, head): warp w holds rows w, w + 16,
// ...; lane l holds elements l E .. l E + E - 1 of a row (E = D / 32), so the butterfly strides
// below E run inside a lane and the larger ones across lanes with one shuffle each.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/attention_fp8_params.h"
#include "ops/cuda/attention/flash_fp8_wgmma.cuh"

namespace ft::cuda::flash {

constexpr int kFp8QuantThreads = 512;

// The E bf16 elements at x (8 E-byte aligned) as floats.
template <int E>
__device__ __forceinline__ void load_bf16(float (&v)[E], const uint16_t* x) {
  uint32_t w[E / 2];
  if constexpr (E == 2) {
    w[0] = *reinterpret_cast<const uint32_t*>(x);
  } else if constexpr (E == 4) {
    const uint2 u = *reinterpret_cast<const uint2*>(x);
    w[0] = u.x, w[1] = u.y;
  } else {
    const uint4 u = *reinterpret_cast<const uint4*>(x);
    w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
  }
#pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const float2 f = unpack2<true>(w[i]);
    v[2 * i] = f.x, v[2 * i + 1] = f.y;
  }
}

template <int D, int kTileRows>
__global__ void __launch_bounds__(kFp8QuantThreads) fp8_quantize_kernel(const Fp8QuantParams p) {
  constexpr int kWarps = kFp8QuantThreads / 32, kRows = kTileRows / kWarps, E = D / 32;
  static_assert(kTileRows % kWarps == 0 && D % 32 == 0 && E <= 8, "quantiser shape");
  __shared__ float warp_amax[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int T = p.T, T_pad = fp8_padded_rows(T), tiles = T_pad / kTileRows;
  const int tile = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  const uint16_t* x = p.x + b * p.batch_stride + h * p.head_stride;

  float v[kRows][E];
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int t = tile * kTileRows + warp + i * kWarps;
    if (t < T) {
      load_bf16<E>(v[i], x + t * p.row_stride + lane * E);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) v[i][e] = 0.f;
    }
    if (p.hadamard && t < T) {  // warp-uniform (t is); padding rows stay +0 like the CPU's
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int d = lane * E + e;
        if ((p.sign_bits[d / 32] >> (d % 32)) & 1u) v[i][e] = -v[i][e];
      }
#pragma unroll
      for (int s = 1; s < E; s *= 2)  // strides inside the lane
#pragma unroll
        for (int e = 0; e < E; ++e)
          if ((e & s) == 0) {
            const float a = v[i][e], c = v[i][e + s];
            v[i][e] = __fadd_rn(a, c);
            v[i][e + s] = __fsub_rn(a, c);
          }
#pragma unroll
      for (int s = 1; s < 32; s *= 2) {  // stride s E: partner lane lane ^ s, same element
        const bool upper = lane & s;    // this lane holds the "b" of a - b
#pragma unroll
        for (int e = 0; e < E; ++e) {
          const float other = __shfl_xor_sync(0xffffffffu, v[i][e], s);
          v[i][e] = upper ? __fsub_rn(other, v[i][e]) : __fadd_rn(v[i][e], other);
        }
      }
    }
#pragma unroll
    for (int e = 0; e < E; ++e) amax = fmaxf(amax, fabsf(v[i][e]));
  }
#pragma unroll
  for (int s = 16; s > 0; s /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, s));
  if (lane == 0) warp_amax[warp] = amax;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) amax = fmaxf(amax, warp_amax[w]);

  if (p.amax_only) {  // per-tensor, first pass: |x| >= 0, so float order is int order
    if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(p.amax), __float_as_int(amax));
    return;
  }
  if (p.per_tensor) amax = *p.amax;
  const float inv = amax > 0.f ? __fdiv_rn(kE4m3Max, amax) : 1.f;
  if (threadIdx.x == 0) {
    const float norm = p.hadamard ? __fdiv_rn(1.f, __fsqrt_rn(static_cast<float>(D))) : 1.f;
    p.scales[static_cast<int64_t>(bh) * tiles + tile] = amax > 0.f ? __fmul_rn(__fdiv_rn(amax, kE4m3Max), norm) : 1.f;
  }
  uint8_t* out = p.out;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int t = tile * kTileRows + warp + i * kWarps;
    float y[E];
#pragma unroll
    for (int e = 0; e < E; ++e) y[e] = __fmul_rn(v[i][e], inv);
    if (p.operand == Fp8Operand::kV) {  // transposed: E single bytes in E rows of V^T
#pragma unroll
      for (int e = 0; e < E; e += 2) {
        const uint32_t two = pack_e4m3x4(y[e], y[e + 1], 0.f, 0.f);
        out[fp8_v_offset(bh, t, lane * E + e, T_pad, D)] = static_cast<uint8_t>(two);
        out[fp8_v_offset(bh, t, lane * E + e + 1, T_pad, D)] = static_cast<uint8_t>(two >> 8);
      }
      continue;
    }
    // Q, K: the E bytes are consecutive in one 16-byte chunk of the image.
    const int64_t o = p.operand == Fp8Operand::kQ ? fp8_q_offset(bh, t, lane * E, T_pad, D)
                                                  : fp8_k_offset(bh, t, lane * E, T_pad, D);
    if constexpr (E == 2) {
      *reinterpret_cast<uint16_t*>(out + o) = static_cast<uint16_t>(pack_e4m3x4(y[0], y[1], 0.f, 0.f));
    } else if constexpr (E == 4) {
      *reinterpret_cast<uint32_t*>(out + o) = pack_e4m3x4(y[0], y[1], y[2], y[3]);
    } else {
      *reinterpret_cast<uint2*>(out + o) =
          make_uint2(pack_e4m3x4(y[0], y[1], y[2], y[3]), pack_e4m3x4(y[4], y[5], y[6], y[7]));
    }
  }
}

}  // namespace ft::cuda::flash
