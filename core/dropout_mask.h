// The one dropout mask function shared by plain dropout, naive attention and flash attention.
//
// Element (row, col) of slice `slice` (for attention: slice = batch * H + head) is kept iff a
// 16-bit piece of Philox output is >= `threshold`. One Philox call yields eight 16-bit pieces,
// covering columns 8*g .. 8*g+7 of one row:
//   key     = (seed lo, seed hi)
//   counter = (g = col / 8, row, lo32(offset + slice), hi32(offset + slice))
// The mask is therefore a function of (seed, offset, slice, row, col) only -- independent of
// tiling, launch order and device -- so a backward pass, another kernel or a resumed run that
// passes the same PhiloxState regenerates it exactly. A kernel using this consumes `slices`
// offsets: the caller advances the generator by that amount.
//
// 16-bit pieces instead of 8-bit ones: threshold = round(p * 65536) makes the drop probability
// p to within 2^-17 (8-bit pieces bias it by up to 0.2% relative at p = 0.1).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"
#include "core/philox.h"

namespace ft {

struct DropoutParams {
  uint64_t seed = 0;
  uint64_t offset = 0;
  uint32_t threshold = 0;  // keep iff piece >= threshold; 0 keeps everything, 65536 drops all
  float keep_scale = 1.f;  // 1 / (1 - p), applied to kept elements
  // Graph replay (core/philox.h): a device word added to `offset`. A CUDA kernel calls
  // resolve_dropout_offset once at its start, before any dropout_bits, so the rest of it sees a
  // plain offset.
  const uint64_t* offset_base = nullptr;
};

// Folds *offset_base into offset (device code; a no-op when offset_base is null).
FT_HOST_DEVICE void resolve_dropout_offset(DropoutParams& d) {
  if (d.offset_base != nullptr) {
    d.offset += *d.offset_base;
    d.offset_base = nullptr;
  }
}

inline DropoutParams make_dropout_params(PhiloxState state, float p) {
  DropoutParams d;
  d.seed = state.seed;
  d.offset = state.offset;
  d.offset_base = state.offset_base;
  d.threshold = static_cast<uint32_t>(std::lround(static_cast<double>(p) * 65536.0));
  d.keep_scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  return d;
}

// Philox bits for columns 8*group .. 8*group+7 of `row` in `slice`.
FT_HOST_DEVICE PhiloxBits dropout_bits(const DropoutParams& d, uint64_t slice, uint32_t row,
                                       uint32_t group) {
  const uint64_t ctr = d.offset + slice;
  return philox4x32_10(group, row, static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32),
                       static_cast<uint32_t>(d.seed), static_cast<uint32_t>(d.seed >> 32));
}

// Whether column (8*group + j) is kept, given the bits of its group; j in [0, 8).
FT_HOST_DEVICE bool dropout_keep(const PhiloxBits& bits, int j, uint32_t threshold) {
  const uint32_t word = bits.v[j >> 1];
  const uint32_t piece = (j & 1) ? (word >> 16) : (word & 0xFFFFu);
  return piece >= threshold;
}

// Convenience for reference code: the keep decision of one element.
FT_HOST_DEVICE bool dropout_keep_at(const DropoutParams& d, uint64_t slice, uint32_t row,
                                    uint32_t col) {
  return dropout_keep(dropout_bits(d, slice, row, col >> 3), static_cast<int>(col & 7u), d.threshold);
}

}  // namespace ft
