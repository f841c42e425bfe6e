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

TEST(AttentionKeepBits, BlockIndexCoversTheStoredBlocksOnce) {
  for (bool causal : {false, true})
    for (int T : {1, 15, 16, 17, 63, 64, 65, 100, 1024, 1030, 4096}) {
      SCOPED_TRACE(testing::Message() << "T " << T << (causal ? " causal" : ""));
      const int nk = keep_key_tiles(T), nq = keep_query_blocks(T);
      EXPECT_EQ(nk, (T + 15) / 16);
      EXPECT_EQ(nq, (T + 63) / 64);
      std::set<int64_t> seen;
      for (int k = 0; k < nk + 2; ++k)
        for (int Q = 0; Q < nq + 2; ++Q) {
          const bool stored = keep_block_stored(T, causal, k, Q);
          EXPECT_EQ(stored, k < nk && Q < nq && (!causal || 64 * Q + 63 >= 16 * k)) << "k " << k << " Q " << Q;
          if (!stored) continue;
          const int64_t i = keep_block_index(T, causal, k, Q);
          EXPECT_GE(i, 0);
          EXPECT_LT(i, keep_blocks_per_slice(T, causal));
          EXPECT_TRUE(seen.insert(i).second) << "block (" << k << ", " << Q << ") shares index " << i;
        }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), keep_blocks_per_slice(T, causal));
    }
  EXPECT_EQ(keep_bits_bytes(2, 3, 17, false), int64_t{2} * 3 * 2 * 1 * 128);
}

// keep[query][key] of one block (64 queries x 16 keys), packed as the forward's lanes do tile by tile
// and read back as the backward's lanes do.
TEST(AttentionKeepBits, ForwardLanesWriteWhatBackwardLanesRead) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    bool keep[64][16];
    for (auto& row : keep)
      for (bool& x : row) x = rng() % 10 != 0;
    uint8_t block[kKeepBlockBytes] = {};
    std::set<int> bytes;
    // Forward lane 4 r + c of tile i holds rows 16 i + r + 8 h and keys 8 t + 2 c + e; bit 4 h + 2 t + e.
    for (int i = 0; i < 4; ++i)
      for (int lane = 0; lane < 32; ++lane) {
        const int r = lane >> 2, c = lane & 3;
        uint32_t byte = 0;
        for (int h = 0; h < 2; ++h)
          for (int t = 0; t < 2; ++t)
            for (int e = 0; e < 2; ++e)
              byte |= static_cast<uint32_t>(keep[16 * i + r + 8 * h][8 * t + 2 * c + e]) << (4 * h + 2 * t + e);
        const int at = keep_byte_of_forward_lane(lane, i);
        ASSERT_TRUE(at >= 0 && at < kKeepBlockBytes);
        block[at] = static_cast<uint8_t>(byte);
        bytes.insert(at);
      }
    EXPECT_EQ(bytes.size(), 128u) << "every lane and tile its own byte";
    // Backward lane 4 r + c, element [nb][e]: query 8 nb + 2 c + e % 2, key r + 8 (e / 2).
    for (int lane = 0; lane < 32; ++lane) {
      const int r = lane >> 2, c = lane & 3, at = keep_bytes_of_backward_lane(lane);
      ASSERT_EQ(at % 8, 0);
      uint64_t eight = 0;
      for (int j = 7; j >= 0; --j) eight = (eight << 8) | block[at + j];  // little-endian, as the GPU
      uint32_t got = 0;
      for (int i = 0; i < 4; ++i) got |= transposed_keep_byte(static_cast<uint32_t>(eight >> (16 * i)) & 0xFFFFu, lane) << (8 * i);
      for (int nb = 0; nb < 8; ++nb)
        for (int e = 0; e < 4; ++e)
          ASSERT_EQ((got >> (4 * nb + e)) & 1u, static_cast<uint32_t>(keep[8 * nb + 2 * c + (e & 1)][r + 8 * (e >> 1)]))
              << "trial " << trial << " lane " << lane << " element [" << nb << "][" << e << "]";
    }
  }
}

}  // namespace
}  // namespace ft
