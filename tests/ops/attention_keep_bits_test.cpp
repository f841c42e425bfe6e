// The stored dropout keep bits' layout (ops/attention_keep_bits.h), on the CPU: the tile index
// covers exactly the stored tiles, and what the forward's lanes write is what the backward's lanes
// read, element for element, in the two accumulator layouts the kernels hold (the GPU test
// FlashCuda.StoredKeepBitsGiveTheSameGradients runs the kernels themselves).
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "ops/attention_keep_bits.h"

namespace ft {
namespace {

TEST(AttentionKeepBits, TileIndexCoversTheStoredTilesOnce) {
  for (bool causal : {false, true})
    for (int T : {1, 15, 16, 17, 100, 1024, 1030}) {
      SCOPED_TRACE(testing::Message() << "T " << T << (causal ? " causal" : ""));
      const int n = keep_tiles_per_side(T);
      EXPECT_EQ(n, (T + 15) / 16);
      std::set<int64_t> seen;
      for (int k = 0; k < n + 2; ++k)
        for (int q = 0; q < n + 2; ++q) {
          const bool stored = keep_tile_stored(T, causal, k, q);
          EXPECT_EQ(stored, k < n && q < n && (!causal || q >= k)) << "k " << k << " q " << q;
          if (!stored) continue;
          const int64_t i = keep_tile_index(T, causal, k, q);
          EXPECT_GE(i, 0);
          EXPECT_LT(i, keep_tiles_per_slice(T, causal));
          EXPECT_TRUE(seen.insert(i).second) << "tile (" << k << ", " << q << ") shares index " << i;
        }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), keep_tiles_per_slice(T, causal));
    }
  EXPECT_EQ(keep_bits_bytes(4, 12, 4096, true), int64_t{4} * 12 * (256 * 257 / 2) * 32);
  EXPECT_EQ(keep_bits_bytes(2, 3, 17, false), int64_t{2} * 3 * 4 * 32);
}

// keep[query][key] of one 16 x 16 tile, packed as the forward's lanes do and read back as the
// backward's lanes do.
TEST(AttentionKeepBits, ForwardLanesWriteWhatBackwardLanesRead) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    bool keep[16][16];
    for (auto& row : keep)
      for (bool& x : row) x = rng() % 10 != 0;
    uint8_t tile[kKeepTileBytes] = {};
    // Forward lane 4 r + c holds rows r + 8 h and keys 8 t + 2 c + e; bit 4 h + 2 t + e of its byte.
    for (int lane = 0; lane < 32; ++lane) {
      const int r = lane >> 2, c = lane & 3;
      uint32_t byte = 0;
      for (int h = 0; h < 2; ++h)
        for (int t = 0; t < 2; ++t)
          for (int e = 0; e < 2; ++e) byte |= static_cast<uint32_t>(keep[r + 8 * h][8 * t + 2 * c + e]) << (4 * h + 2 * t + e);
      tile[keep_byte_of_forward_lane(lane)] = static_cast<uint8_t>(byte);
    }
    std::set<int> bytes;
    for (int lane = 0; lane < 32; ++lane) bytes.insert(keep_byte_of_forward_lane(lane));
    EXPECT_EQ(bytes.size(), 32u) << "every lane its own byte";
    // Backward lane 4 r + c, element [h][e]: query 8 h + 2 c + e % 2, key r + 8 (e / 2).
    for (int lane = 0; lane < 32; ++lane) {
      const int r = lane >> 2, c = lane & 3, at = keep_pair_of_backward_lane(lane);
      ASSERT_EQ(at % 2, 0);
      const uint32_t pair = tile[at] | (static_cast<uint32_t>(tile[at + 1]) << 8);  // little-endian, as the GPU
      const uint32_t got = transposed_keep_byte(pair, lane);
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 4; ++e)
          ASSERT_EQ((got >> (4 * h + e)) & 1u, static_cast<uint32_t>(keep[8 * h + 2 * c + (e & 1)][r + 8 * (e >> 1)]))
              << "trial " << trial << " lane " << lane << " element [" << h << "][" << e << "]";
    }
  }
}

}  // namespace
}  // namespace ft
