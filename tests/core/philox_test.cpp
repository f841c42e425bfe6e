#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "core/dropout_mask.h"
#include "core/philox.h"
#include "core/random.h"

namespace ft {
namespace {

// Known-answer vectors of Philox4x32-10 published with Random123 (kat_vectors).
TEST(Philox, MatchesRandom123KnownAnswers) {
  PhiloxBits z = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(z.v[0], 0x6627e8d5u);
  EXPECT_EQ(z.v[1], 0xe169c58du);
  EXPECT_EQ(z.v[2], 0xbc57ac4cu);
  EXPECT_EQ(z.v[3], 0x9b00dbd8u);

  PhiloxBits f = philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ(f.v[0], 0x408f276du);
  EXPECT_EQ(f.v[1], 0x41c83b0eu);
  EXPECT_EQ(f.v[2], 0xa20bc7c6u);
  EXPECT_EQ(f.v[3], 0x6d5451fdu);

  PhiloxBits pi = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.v[0], 0xd16cfe09u);
  EXPECT_EQ(pi.v[1], 0x94fdccebu);
  EXPECT_EQ(pi.v[2], 0x5001e420u);
  EXPECT_EQ(pi.v[3], 0x24126ea1u);
}

TEST(Generator, AdvancesOffsetByWhatWasConsumed) {
  Generator g(42, 7);
  const PhiloxState a = g.next(3);
  const PhiloxState b = g.next(1);
  EXPECT_EQ(a.seed, 42u);
  EXPECT_EQ(a.offset, 7u);
  EXPECT_EQ(b.offset, 10u);
  EXPECT_EQ(g.state().offset, 11u);
}

TEST(DropoutMask, DropsTheRequestedFractionWithinBinomialTolerance) {
  for (float p : {0.1f, 0.5f}) {
    const DropoutParams d = make_dropout_params(PhiloxState{123, 0}, p);
    const int rows = 256, cols = 1024;
    int64_t dropped = 0;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) dropped += !dropout_keep_at(d, 3, r, c);
    const double n = double(rows) * cols;
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(dropped, n * p, 5 * sigma) << "p = " << p;
  }
}

// The layout the flash kernels rely on (flash_tile.cuh dropout_tile_bits): in a 16 x 16 tile at
// 16-aligned (row0, col0), the accumulator elements of lane (r, c) -- rows row0 + r + 8h, columns
// col0 + 8t + 2c + e (the mma m16n8 C fragment) -- are exactly the pieces of one call,
// (row_pair(row0) + r, col_group(col0) + c), word 2h + t, low half for e = 0. Checked against the
// definition written out here, not against the header's own piece lookup.
TEST(DropoutMask, OneCallIsOneLanesAccumulatorTile) {
  const DropoutParams d = make_dropout_params(PhiloxState{77, 5}, 0.3f);
  for (uint32_t row0 : {0u, 16u, 48u, 1008u})
    for (uint32_t col0 : {0u, 32u, 496u})
      for (uint32_t lane = 0; lane < 32; ++lane) {
        const uint32_t r = lane / 4, c = lane % 4;
        const uint32_t pair = 8 * (row0 / 16) + r, group = 4 * (col0 / 16) + c;
        const PhiloxBits bits = philox4x32_10(group, pair, static_cast<uint32_t>(d.offset + 2), 0,
                                              77u, 0);  // the seed, scheduled by philox4x32_10 itself
        for (uint32_t h = 0; h < 2; ++h)
          for (uint32_t t = 0; t < 2; ++t)
            for (uint32_t e = 0; e < 2; ++e) {
              const uint32_t row = row0 + r + 8 * h, col = col0 + 8 * t + 2 * c + e;
              EXPECT_EQ(dropout_row_pair(row), pair);
              EXPECT_EQ(dropout_col_group(col), group);
              const uint32_t word = bits.v[2 * h + t];
              const uint32_t piece = e ? word >> 16 : word & 0xFFFFu;
              EXPECT_EQ(dropout_keep_at(d, 2, row, col), piece >= d.threshold)
                  << "row " << row << " col " << col;
            }
      }
}

// No two elements share a piece: (call, word, half) is one-to-one over a 64 x 64 block, so the
// keep decisions are independent draws.
TEST(DropoutMask, EveryElementHasItsOwnPiece) {
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>> seen;
  for (uint32_t row = 0; row < 64; ++row)
    for (uint32_t col = 0; col < 64; ++col)
      seen.insert({dropout_row_pair(row), dropout_col_group(col), 2 * ((row / 8) % 2) + (col / 8) % 2, col % 2});
  EXPECT_EQ(seen.size(), 64u * 64u);
}

TEST(DropoutMask, DependsOnSeedOffsetSliceRowAndColumn) {
  const DropoutParams d = make_dropout_params(PhiloxState{1, 0}, 0.5f);
  const DropoutParams other_seed = make_dropout_params(PhiloxState{2, 0}, 0.5f);
  DropoutParams other_offset = d;
  other_offset.offset = 1;
  int diff_seed = 0, diff_offset = 0, diff_slice = 0, diff_row = 0;
  for (uint32_t c = 0; c < 512; ++c) {
    const bool k = dropout_keep_at(d, 0, 0, c);
    diff_seed += k != dropout_keep_at(other_seed, 0, 0, c);
    diff_offset += k != dropout_keep_at(other_offset, 0, 0, c);
    diff_slice += k != dropout_keep_at(d, 1, 0, c);
    diff_row += k != dropout_keep_at(d, 0, 1, c);
  }
  // Independent fair coins disagree about half the time; identical streams never.
  for (int diff : {diff_seed, diff_offset, diff_slice, diff_row}) EXPECT_GT(diff, 150);
  // Offset o with slice s+1 is the same stream as offset o+1 with slice s: the documented keying.
  for (uint32_t c = 0; c < 64; ++c) EXPECT_EQ(dropout_keep_at(d, 1, 5, c), dropout_keep_at(other_offset, 0, 5, c));
}

// The kernels compare both pieces of a word against one bound (dropout_bound); the plain
// comparison piece >= threshold is the reference, over every threshold the kernels see (1 .. 65536)
// and words whose pieces sit at and around it.
TEST(DropoutMask, BoundFormEqualsPieceComparison) {
  const uint32_t thresholds[] = {1, 2, 255, 256, 6554, 32767, 32768, 65535, 65536};
  for (uint32_t t : thresholds) {
    DropoutParams d;
    d.threshold = t;
    const uint32_t bound = dropout_bound(d);
    const uint32_t pieces[] = {0, 1, t - 1, t, t + 1, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF};
    for (uint32_t lo : pieces)
      for (uint32_t hi : pieces) {
        const uint32_t word = ((hi & 0xFFFFu) << 16) | (lo & 0xFFFFu);
        EXPECT_EQ(dropout_keep_lo(word, bound), (lo & 0xFFFFu) >= t) << t << " " << lo;
        EXPECT_EQ(dropout_keep_hi(word, bound), (hi & 0xFFFFu) >= t) << t << " " << hi;
      }
  }
}

TEST(DropoutMask, ThresholdEdgesKeepAllOrDropAll) {
  const DropoutParams keep = make_dropout_params(PhiloxState{9, 0}, 0.f);
  const DropoutParams drop = make_dropout_params(PhiloxState{9, 0}, 1.f);
  for (uint32_t c = 0; c < 256; ++c) {
    EXPECT_TRUE(dropout_keep_at(keep, 0, 0, c));
    EXPECT_FALSE(dropout_keep_at(drop, 0, 0, c));
  }
  EXPECT_FLOAT_EQ(make_dropout_params({}, 0.1f).keep_scale, 1.f / 0.9f);
}

}  // namespace
}  // namespace ft
