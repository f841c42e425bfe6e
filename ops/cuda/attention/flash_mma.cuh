// Warp-level matrix products shared by the flash kernels.
#pragma once

#include <cstdint>

#include "ops/cuda/attention/flash_ptx.cuh"

namespace ft::cuda::flash {

// Zeroes mma accumulator fragments (registers: the unrolled stores compile to moves of 0).
template <int kA, int kB>
__device__ __forceinline__ void zero_fragments(float (&acc)[kA][kB][4]) {
#pragma unroll
  for (int a = 0; a < kA; ++a)
#pragma unroll
    for (int b = 0; b < kB; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[a][b][e] = 0.f;
}
template <int kA>
__device__ __forceinline__ void zero_fragments(float (&acc)[kA][4]) {
#pragma unroll
  for (int a = 0; a < kA; ++a)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[a][e] = 0.f;
}

// The A fragment (16 rows x 16 columns, ldmatrix x4) of rows [row0, row0 + 16), columns
// [16 kk, 16 kk + 16) of a row-major tile of 16-bit elements in shared memory (row stride S).
template <int S>
__device__ __forceinline__ void load_a_frag(uint32_t (&a)[4], const uint16_t* s, int row0, int kk, int lane) {
  ldmatrix_x4(a, smem_u32(s + (row0 + (lane & 15)) * S + kk * 16 + (lane >> 4) * 8));
}

// A fragment kk of a warp's 16-row slab (rows [row0, row0 + 16) of `s`): a copy of regs[kk] when the
// kernel keeps all of the slab's fragments in registers (kInRegs), else read from shared memory.
template <bool kInRegs, int S, int kFrags>
__device__ __forceinline__ void a_frag(uint32_t (&a)[4], const uint32_t (&regs)[kFrags][4], const uint16_t* s,
                                       int row0, int kk, int lane) {
  if constexpr (kInRegs) {
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = regs[kk][i];
  } else {
    load_a_frag<S>(a, s, row0, kk, lane);
  }
}

// acc += P B for one warp's MT slabs of 16 rows. P (MT x 16 rows, BN columns) is a tile the warp
// just computed, still in mma accumulator registers; it becomes the A operand in registers, with
// no trip through shared memory. B is BN rows x D columns of 16-bit elements in shared memory
// (row stride S elements), read transposed by ldmatrix. The forward's O += P V and the
// deterministic dQ kernel's dQ += dS K are this product.
template <bool kBF16, int MT, int BN, int D, int S>
__device__ __forceinline__ void mma_acc_by_smem(float (&acc)[MT][D / 8][4], const float (&p)[MT][BN / 8][4],
                                                const uint16_t* sB, int lane) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) acc_to_a<kBF16>(a[mi], p[mi][2 * kk], p[mi][2 * kk + 1]);
#pragma unroll
    for (int dj = 0; dj < D / 16; ++dj) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, smem_u32(sB + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * S + dj * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        mma_16816<kBF16>(acc[mi][2 * dj], a[mi], b[0], b[1]);
        mma_16816<kBF16>(acc[mi][2 * dj + 1], a[mi], b[2], b[3]);
      }
    }
  }
}

}  // namespace ft::cuda::flash
