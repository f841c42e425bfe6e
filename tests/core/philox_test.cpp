#include <gtest/gtest.h>

#include <cmath>

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

TEST(DropoutMask, DependsOnSeedOffsetSliceRowAndColumn) {
  const DropoutParams d = make_dropout_params(PhiloxState{1, 0}, 0.5f);
  DropoutParams other_seed = d;
  other_seed.seed = 2;
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
