// The FP8 attention's quantiser: bf16 (B, T, H, D) rows -> e4m3 tile images + fp32 scales
// (ops/attention_fp8_params.h), optionally rotating Q and K by a sign-flipped Walsh-Hadamard matrix
// along D first. The arithmetic is ops/cpu/attention_fp8_reference.cpp's fp8_quantize, operation
// for operation (explicit _rn intrinsics: no contraction), so the CPU emulation reproduces the bytes.
//
// One CTA per tile image, split as flash_fp8_quantize_shape.h says: every thread loads its rows
// with 16-byte loads (the ops front door guarantees 16-byte aligned rows), the CTA reduces the
// tile's |x| max, then the threads write their e4m3 bytes into a shared-memory copy of the image
// and the CTA copies the image (contiguous in global memory) out with coalesced 16-byte stores.
// V's bytes go in 32-bit words of four keys (V^T rows hold keys), so no byte is scattered.
//
// Registers: a thread keeps its rows across the CTA's max reduction, as fp32 when rotated (the
// butterflies' sums are not bf16) and as the loaded bf16 pairs otherwise (half the registers; the
// floats are re-made after the barrier).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ops/attention_fp8_params.h"
#include "ops/cuda/attention/flash_fp8_quantize_shape.h"
#include "ops/cuda/attention/flash_fp8_wgmma.cuh"

namespace ft::cuda::flash {

// Element e (0..7) of 8 bf16 loaded as one uint4, as a float.
__device__ __forceinline__ float bf16_of(const uint4& u, int e) {
  const uint32_t w = e < 2 ? u.x : e < 4 ? u.y : e < 6 ? u.z : u.w;
  const float2 f = unpack2<true>(w);
  return e % 2 ? f.y : f.x;
}

// x (8 floats per row) -> x diag(signs) H_D for the rows of a Q / K thread (Fp8QuantShape: a row's
// D / 8 threads in consecutive lanes; bit e of signs flips element e). Butterfly strides 1, 2, 4
// inside the thread, 8 s across lanes lane ^ s, in the CPU's order; rows past T (zeros) get no sign
// flips, so they stay +0.
template <int D, int kRows>
__device__ __forceinline__ void hadamard_rows(float (&v)[kRows][8], const bool (&live)[kRows], uint32_t signs) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (live[i] && ((signs >> e) & 1u)) v[i][e] = -v[i][e];
#pragma unroll
    for (int s = 1; s < 8; s *= 2)
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if ((e & s) == 0) {
          const float a = v[i][e], c = v[i][e + s];
          v[i][e] = __fadd_rn(a, c);
          v[i][e + s] = __fsub_rn(a, c);
        }
#pragma unroll
    for (int s = 1; s < D / 8; s *= 2) {  // stride 8 s: partner lane lane ^ s, same element
      const bool upper = lane & s;         // this lane holds the "b" of a - b
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float other = __shfl_xor_sync(0xffffffffu, v[i][e], s);
        v[i][e] = upper ? __fsub_rn(other, v[i][e]) : __fadd_rn(v[i][e], other);
      }
    }
  }
}

// w[k] <- w[(k + n) % 8], n in [0, 8): a barrel rotation by the bits of n (selects, no local memory).
__device__ __forceinline__ void rotate_words(uint32_t (&w)[8], int n) {
#pragma unroll
  for (int s = 1; s < 8; s *= 2) {
    uint32_t r[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) r[k] = (n & s) ? w[(k + s) % 8] : w[k];
#pragma unroll
    for (int k = 0; k < 8; ++k) w[k] = r[k];
  }
}

template <int D, Fp8Operand kOperand, bool kRotate>
__global__ void __launch_bounds__(Fp8QuantShape<D, kOperand>::kThreads)
    fp8_quantize_kernel(const Fp8QuantParams p) {
  using Shape = Fp8QuantShape<D, kOperand>;
  constexpr int kRows = Shape::kRows, kThreads = Shape::kThreads, kWarps = Shape::kWarps, R = Shape::kTileRows;
  static_assert(!kRotate || kOperand != Fp8Operand::kV, "V is never rotated");
  __shared__ float warp_amax[kWarps];
  __shared__ uint4 image[Shape::kImageBytes / 16];
  uint8_t* const image_bytes = reinterpret_cast<uint8_t*>(image);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int T = p.T, T_pad = fp8_padded_rows(T), tiles = T_pad / R;
  const int tile = blockIdx.x, bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  const uint16_t* x = p.x + b * p.batch_stride + h * p.head_stride;

  int row[kRows], col[kRows];
  bool live[kRows];  // row < T: rows past T are zeros
  uint4 raw[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    Shape::place(threadIdx.x, i, row[i], col[i]);
    const int t = tile * R + row[i];
    live[i] = t < T;
    raw[i] = live[i] ? *reinterpret_cast<const uint4*>(x + t * p.row_stride + col[i]) : make_uint4(0, 0, 0, 0);
  }
  float v[kRotate ? kRows : 1][8];  // the rotated rows (unused unrotated)
  if constexpr (kRotate) {
#pragma unroll
    for (int i = 0; i < kRows; ++i)
#pragma unroll
      for (int e = 0; e < 8; ++e) v[i][e] = bf16_of(raw[i], e);
    // Sign bits col .. col + 7 (Q, K: one col for all rows), by selects among the words moved into
    // registers through asm: else the compiler turns the selects back into a variable index of the
    // parameter, which copies the parameters to local memory.
    uint32_t word = 0;
#pragma unroll
    for (int w = 0; w < D / 32; ++w) {
      uint32_t bits;
      asm("mov.b32 %0, %1;" : "=r"(bits) : "r"(p.sign_bits[w]));
      word = w == col[0] / 32 ? bits : word;
    }
    hadamard_rows<D, kRows>(v, live, (word >> (col[0] % 32)) & 0xFFu);
  }
  auto value = [&](int i, int e) {
    if constexpr (kRotate) return v[i][e];
    else return bf16_of(raw[i], e);
  };

  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(value(i, e)));
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
    const float norm = kRotate ? __fdiv_rn(1.f, __fsqrt_rn(static_cast<float>(D))) : 1.f;
    p.scales[static_cast<int64_t>(bh) * tiles + tile] = amax > 0.f ? __fmul_rn(__fdiv_rn(amax, kE4m3Max), norm) : 1.f;
  }
  if constexpr (!kRotate) {
    // Hide the loaded words' values from the compiler, so it re-makes the floats here instead of
    // keeping the ones of the max in registers across the barrier.
#pragma unroll
    for (int i = 0; i < kRows; ++i) asm volatile("" : "+r"(raw[i].x), "+r"(raw[i].y), "+r"(raw[i].z), "+r"(raw[i].w));
  }
  auto e4m3 = [&](int i, int e) { return __fmul_rn(value(i, e), inv); };

  if constexpr (kOperand == Fp8Operand::kV) {
    // Per group of 4 rows: word e = keys k0, k0 + 1, k0 + 8, k0 + 9 of column col + e, which are
    // V^T row col + e, slots fp8_pv_slot(k0) + 0..3. Lane j = (col / 8) % 8 stores its words from
    // e = j on: the 8 lanes of a key group then hit 8 different 16-byte chunks (the image swizzle
    // XORs the chunk with the row's low 3 bits), so the warp's 32 words land in 32 banks.
#pragma unroll
    for (int g = 0; g < kRows; g += 4) {
      uint32_t w[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) w[e] = pack_e4m3x4(e4m3(g, e), e4m3(g + 1, e), e4m3(g + 2, e), e4m3(g + 3, e));
      const int first = (col[g] / 8) % 8, slot = fp8_pv_slot(row[g]);
      rotate_words(w, first);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int d = col[g] + (k + first) % 8;
        *reinterpret_cast<uint32_t*>(image_bytes + fp8_tile_offset(d, slot, D, kFp8KvTileRows)) = w[k];
      }
    }
  } else {
    // Q, K: a row's 8 columns are 8 consecutive bytes of one 16-byte chunk of the image.
#pragma unroll
    for (int i = 0; i < kRows; ++i)
      *reinterpret_cast<uint2*>(image_bytes + fp8_tile_offset(row[i], col[i], R, D)) =
          make_uint2(pack_e4m3x4(e4m3(i, 0), e4m3(i, 1), e4m3(i, 2), e4m3(i, 3)),
                     pack_e4m3x4(e4m3(i, 4), e4m3(i, 5), e4m3(i, 6), e4m3(i, 7)));
  }
  __syncthreads();
  // The tile's image is R * D contiguous bytes at the tile's first row (ops/attention_fp8_params.h).
  uint4* const out = reinterpret_cast<uint4*>(p.out + (static_cast<int64_t>(bh) * T_pad + static_cast<int64_t>(tile) * R) * D);
  constexpr int kChunks = Shape::kImageBytes / 16;
  static_assert(kChunks % kThreads == 0, "whole 16-byte chunks per thread");
#pragma unroll
  for (int k = 0; k < kChunks / kThreads; ++k) out[threadIdx.x + k * kThreads] = image[threadIdx.x + k * kThreads];
}

}  // namespace ft::cuda::flash
