// The one dropout mask function shared by plain dropout, naive attention and flash attention.
//
// Element (row, col) of slice `slice` (for attention: slice = batch * H + head) is kept iff a
// 16-bit piece of Philox output is >= `threshold`. One Philox call yields eight 16-bit pieces; it
// covers the eight elements that one thread holds of a 16 x 16 tile in the tensor cores'
// accumulator layout (mma m16n8 C fragments, wgmma's alike): rows r and r + 8 of a 16-row block
// (r < 8), columns 2c, 2c + 1, 2c + 8, 2c + 9 of a 16-column block (c < 4):
//   key     = (seed lo, seed hi), carried as its round keys (core/philox.h)
//   counter = (col group = 4 * (col / 16) + (col % 8) / 2, row pair = 8 * (row / 16) + row % 8,
//              lo32(offset + slice), hi32(offset + slice))
//   piece   = half (col % 2) of word 2 * ((row / 8) % 2) + (col / 8) % 2
// so a flash kernel draws the bits of its own accumulator elements and needs no exchange between
// lanes (with eight consecutive columns per call, as before, each call fed four lanes and the
// kernels transposed the keep bits across them). The mask is a function of (seed, offset, slice,
// row, col) only -- independent of tiling, launch order and device -- so a backward pass, another
// kernel or a resumed run that passes the same PhiloxState regenerates it exactly. A kernel using
// this consumes `slices` offsets: the caller advances the generator by that amount.
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
  PhiloxKeys keys = philox_keys(0, 0);  // the round keys of the seed (make_dropout_params)
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
  d.keys = philox_keys(static_cast<uint32_t>(state.seed), static_cast<uint32_t>(state.seed >> 32));
  d.offset = state.offset;
  d.offset_base = state.offset_base;
  d.threshold = static_cast<uint32_t>(std::lround(static_cast<double>(p) * 65536.0));
  d.keep_scale = p < 1.f ? 1.f / (1.f - p) : 0.f;
  return d;
}

// The call (row pair, col group) of element (row, col), and the piece of it that is the element's.
FT_HOST_DEVICE uint32_t dropout_row_pair(uint32_t row) { return 8u * (row >> 4) + (row & 7u); }
FT_HOST_DEVICE uint32_t dropout_col_group(uint32_t col) { return 4u * (col >> 4) + ((col & 7u) >> 1); }
FT_HOST_DEVICE uint32_t dropout_piece(const PhiloxBits& bits, uint32_t row, uint32_t col) {
  const uint32_t word = bits.v[2u * ((row >> 3) & 1u) + ((col >> 3) & 1u)];
  return (col & 1u) ? (word >> 16) : (word & 0xFFFFu);
}

// Philox bits of the call (row_pair, col_group) in `slice`.
FT_HOST_DEVICE PhiloxBits dropout_bits(const DropoutParams& d, uint64_t slice, uint32_t row_pair,
                                       uint32_t col_group) {
  const uint64_t ctr = d.offset + slice;
  return philox4x32_10(col_group, row_pair, static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32), d.keys);
}

// Whether (row, col) is kept, given the bits of its call.
FT_HOST_DEVICE bool dropout_keep(const PhiloxBits& bits, uint32_t row, uint32_t col, uint32_t threshold) {
  return dropout_piece(bits, row, col) >= threshold;
}

// The kernels' form of the same decision, both 16-bit pieces of a word against one bound,
// (threshold << 16) - 1 in 32-bit arithmetic: the high piece (odd column) is kept iff word > bound,
// the low one (even column) iff (word << 16) > bound. Exact for threshold 1 .. 65536 (65536 wraps
// to bound 2^32 - 1: nothing kept); threshold 0 (p = 0) must not take this path.
FT_HOST_DEVICE uint32_t dropout_bound(const DropoutParams& d) { return (d.threshold << 16) - 1u; }
FT_HOST_DEVICE bool dropout_keep_lo(uint32_t word, uint32_t bound) { return (word << 16) > bound; }
FT_HOST_DEVICE bool dropout_keep_hi(uint32_t word, uint32_t bound) { return word > bound; }

// Convenience for reference code: the keep decision of one element.
FT_HOST_DEVICE bool dropout_keep_at(const DropoutParams& d, uint64_t slice, uint32_t row,
                                    uint32_t col) {
  return dropout_keep(dropout_bits(d, slice, dropout_row_pair(row), dropout_col_group(col)), row, col,
                      d.threshold);
}

}  // namespace ft
