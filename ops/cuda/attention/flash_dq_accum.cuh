// The layout of the backward's fp32 dQ accumulator (AttentionParams::dq_accum).
//
// dq_accum is the backward's own workspace: only the backward kernels add into it and only the
// convert kernel reads it, so it is laid out the way mma.sync accumulators come out rather than as
// (T, D) rows. Per batch * head, T is rounded up to kRowAlign rows; inside, 16-byte chunk
// ((m16 * D / 8 + n8) * 32 + lane) holds what lane `lane` accumulates for the 16 x 8 tile
// (rows 16 m16 .., columns 8 n8 ..) in C fragment order: rows r and r + 8, columns 2c and 2c + 1
// (r = lane / 4, c = lane % 4). So every lane adds one 16-byte chunk per 16 x 8 tile with one
// RED, and a warp's 32 chunks of a tile are 512 contiguous bytes, whatever the kernel's warp
// tiling. Rows past T exist and receive zeros.
//
// The deterministic backward adds the same values as 64-bit fixed-point integers instead
// (DqFixedAdder below): integer addition is associative, so the sum's bits do not depend on the
// order in which key blocks get there, and no key block waits for another. The int64 words keep
// the tile order; inside a tile, element e (0..3, the float4's order) of lane l is word e * 32 + l,
// so each of a warp's four REDs covers 256 contiguous bytes. One int per batch * head follows the
// words: set when a contribution was out of range, it makes that head's dQ NaN.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft::cuda::flash {

// Rows per batch * head: T rounded up to the largest kBlockM of the kernels that add into it (also
// the workspace size the launcher asks for, flash_attention_backward_workspace).
constexpr int kDqAccumRowAlign = 128;
FT_HOST_DEVICE constexpr int64_t dq_accum_rows(int T) {
  return (static_cast<int64_t>(T) + kDqAccumRowAlign - 1) / kDqAccumRowAlign * kDqAccumRowAlign;
}

template <int kHeadDim>
struct DqAccumLayout {
  static constexpr int kRowAlign = kDqAccumRowAlign;
  static constexpr int kTilesD = kHeadDim / 8;

  FT_HOST_DEVICE static constexpr int64_t rows(int T) { return dq_accum_rows(T); }
  // Float offset (within one batch * head) of the chunk of 16 x 8 tile (m16, n8) held by `lane`.
  FT_HOST_DEVICE static constexpr int64_t chunk(int m16, int n8, int lane) {
    return ((static_cast<int64_t>(m16) * kTilesD + n8) * 32 + lane) * 4;
  }
  // Row and column of float 0 of chunk number `index` (= chunk() / 4); float 1 is the next column,
  // floats 2 and 3 the same columns 8 rows further.
  FT_HOST_DEVICE static constexpr int row_of(int64_t index) {
    return static_cast<int>(index / (32 * kTilesD)) * 16 + static_cast<int>(index % 32) / 4;
  }
  FT_HOST_DEVICE static constexpr int col_of(int64_t index) {
    return static_cast<int>((index / 32) % kTilesD) * 8 + 2 * static_cast<int>(index % 4);
  }
  // Fixed-point form: the word (within one batch * head) of element 0 of the chunk at float offset
  // `chunk_floats` (= chunk(m16, n8, lane)); element e is 32 e words further. A tile of 32 chunks
  // is 128 words: (tile * 32 + lane) * 4 floats -> tile * 128 + lane words.
  FT_HOST_DEVICE static constexpr int64_t fixed_word(int64_t chunk_floats, int lane) { return chunk_floats - 3 * lane; }
};

// Floats of the fp32 accumulator, and of the fixed-point one (twice as many words' worth, plus one
// flag int per batch * head rounded up to whole float4s): the workspace holds the larger.
FT_HOST_DEVICE constexpr int64_t dq_accum_float_count(int64_t bh, int T, int D) { return bh * dq_accum_rows(T) * D; }
FT_HOST_DEVICE constexpr int64_t dq_fixed_float_count(int64_t bh, int T, int D) {
  return 2 * dq_accum_float_count(bh, T, D) + (bh + 3) / 4 * 4;
}

// 2^-40 resolution: a dQ element of 1e-6 (before the softmax scale) keeps 1e-6 relative precision
// per add, far below its bf16 rounding. The price is the range: every sum must stay below 2^23 in
// magnitude, which n_blocks contributions below 2^23 / n_blocks each guarantee (partial sums may
// wrap; two's complement addition still gives the right total then).
constexpr int kDqFixedFracBits = 40;

#if defined(__CUDACC__)
// A thread's fixed-point adds into dq_accum: each float becomes round(v * 2^kDqFixedFracBits) as an
// int64 and is added with a 64-bit integer RED. A contribution at or above the bound (or inf / NaN,
// which the conversion would turn into a number) sets `overflow`; flag_overflow() records it for
// the head.
struct DqFixedAdder {
  float max_term;
  bool overflow = false;
  // 2^(63 - kDqFixedFracBits) / n_blocks: n_blocks contributions keep every total inside an int64.
  __device__ explicit DqFixedAdder(int n_blocks)
      : max_term(static_cast<float>(1ull << (63 - kDqFixedFracBits)) / static_cast<float>(n_blocks)) {}
  // v as its fixed-point word, noting a contribution out of range: for kernels that add the words
  // some other way (the warp-specialised backward's bulk reduce-adds from shared memory).
  __device__ unsigned long long to_word(float v) {
    overflow |= !(fabsf(v) < max_term);
    constexpr float kScale = static_cast<float>(1ull << kDqFixedFracBits);
    return static_cast<unsigned long long>(__float2ll_rn(v * kScale));
  }
  __device__ void add(unsigned long long* word, float v) { atomicAdd(word, to_word(v)); }
  // A chunk's four values, element e at word + 32 e (the layout above).
  __device__ void add4(unsigned long long* word, float a, float b, float c, float d) {
    add(word, a);
    add(word + 32, b);
    add(word + 64, c);
    add(word + 96, d);
  }
  // Called by every lane of the warp once its adds are done.
  __device__ void flag_overflow(int* head_flag) const {
    if (__any_sync(0xffffffffu, overflow) && threadIdx.x % 32 == 0) atomicOr(head_flag, 1);
  }
};

// The fp32 accumulator of batch * head `bh` (its DqAccumLayout chunks start here).
template <int kHeadDim>
__device__ inline float* dq_head_floats(float* dq_accum, int64_t bh, int T) {
  return dq_accum + bh * dq_accum_rows(T) * kHeadDim;
}
// The fixed-point words of batch * head `bh`, and its overflow flag.
template <int kHeadDim>
__device__ inline unsigned long long* dq_fixed_words(float* dq_accum, int64_t bh, int T) {
  return reinterpret_cast<unsigned long long*>(dq_accum) + bh * dq_accum_rows(T) * kHeadDim;
}
template <int kHeadDim>
__device__ inline int* dq_fixed_flag(float* dq_accum, int64_t bh_count, int64_t bh, int T) {
  return reinterpret_cast<int*>(dq_fixed_words<kHeadDim>(dq_accum, bh_count, T)) + bh;
}
#endif

}  // namespace ft::cuda::flash
