// The CUDA FP8 quantiser's work split (ops/cuda/attention/flash_fp8_quantize_shape.h), checked on
// the CPU: its threads cover every element of a tile image exactly once, the shared-memory addresses
// the kernel (flash_fp8_quantize_kernel.cuh) writes each element to are that element's byte in the
// layout of ops/attention_fp8_params.h, and the kernel's shared-memory stores are free of bank
// conflicts (its speed depends on that, its bytes do not). The bytes themselves are compared with
// the CPU emulation on the GPU (attention_fp8_cuda_test).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/attention_fp8_params.h"
#include "ops/cuda/attention/flash_fp8_quantize_shape.h"

namespace ft {
namespace {

using cuda::flash::Fp8QuantShape;

// Tile image offset of (row, column) of the tile (row = query / key: the t of fp8_*_offset).
uint32_t layout_offset(Fp8Operand operand, int row, int col, int D) {
  switch (operand) {
    case Fp8Operand::kQ: return static_cast<uint32_t>(fp8_q_offset(0, row, col, kFp8PadRows, D));
    case Fp8Operand::kK: return static_cast<uint32_t>(fp8_k_offset(0, row, col, kFp8PadRows, D));
    case Fp8Operand::kV: return static_cast<uint32_t>(fp8_v_offset(0, row, col, kFp8PadRows, D));
  }
  return 0;
}

// Where the kernel writes element e of row load i of thread `thread` (its store loops, rewritten).
template <int D, Fp8Operand kOperand>
uint32_t kernel_offset(int thread, int i, int e) {
  using S = Fp8QuantShape<D, kOperand>;
  int row, col;
  S::place(thread, i, row, col);
  if constexpr (kOperand == Fp8Operand::kV) {
    int row0, col0;  // the first row of i's group of 4: its slot is the word's column
    S::place(thread, i - i % 4, row0, col0);
    return fp8_tile_offset(col + e, fp8_pv_slot(row0), D, kFp8KvTileRows) + i % 4;  // byte i % 4 of the word
  } else {
    return fp8_tile_offset(row, col, S::kTileRows, D) + e;  // byte e of the uint2
  }
}

template <int D, Fp8Operand kOperand>
void expect_cover_and_layout() {
  using S = Fp8QuantShape<D, kOperand>;
  const std::string name = "D " + std::to_string(D) + " operand " + std::to_string(static_cast<int>(kOperand));
  std::vector<int> hits(static_cast<size_t>(S::kTileRows) * D, 0);
  size_t wrong = 0;
  for (int thread = 0; thread < S::kThreads; ++thread)
    for (int i = 0; i < S::kRows; ++i) {
      int row, col;
      S::place(thread, i, row, col);
      ASSERT_TRUE(row >= 0 && row < S::kTileRows && col >= 0 && col + S::kCols <= D && col % S::kCols == 0)
          << name << ": thread " << thread << " load " << i << " at (" << row << ", " << col << ")";
      for (int e = 0; e < S::kCols; ++e) {
        hits[static_cast<size_t>(row) * D + col + e]++;
        if (kernel_offset<D, kOperand>(thread, i, e) != layout_offset(kOperand, row, col + e, D)) wrong++;
      }
    }
  for (size_t k = 0; k < hits.size(); ++k)
    ASSERT_EQ(hits[k], 1) << name << ": element (" << k / D << ", " << k % D << ") loaded " << hits[k] << " times";
  EXPECT_EQ(wrong, 0u) << name << ": elements written off their layout byte";
}

// f(D, operand) for every head dim and operand, as integral constants (template arguments).
template <class F>
void for_every_shape(F f) {
  using Op = Fp8Operand;
  f(std::integral_constant<int, 64>{}, std::integral_constant<Op, Op::kQ>{});
  f(std::integral_constant<int, 64>{}, std::integral_constant<Op, Op::kK>{});
  f(std::integral_constant<int, 64>{}, std::integral_constant<Op, Op::kV>{});
  f(std::integral_constant<int, 128>{}, std::integral_constant<Op, Op::kQ>{});
  f(std::integral_constant<int, 128>{}, std::integral_constant<Op, Op::kK>{});
  f(std::integral_constant<int, 128>{}, std::integral_constant<Op, Op::kV>{});
  f(std::integral_constant<int, 256>{}, std::integral_constant<Op, Op::kQ>{});
  f(std::integral_constant<int, 256>{}, std::integral_constant<Op, Op::kK>{});
  f(std::integral_constant<int, 256>{}, std::integral_constant<Op, Op::kV>{});
}

TEST(Fp8QuantShape, ThreadsCoverTheTileOnceAndWriteTheLayoutsBytes) {
  for_every_shape([](auto D, auto operand) { expect_cover_and_layout<D(), operand()>(); });
}

// Shared-memory wavefronts of one warp store: the most distinct 4-byte words any bank serves.
int wavefronts(const std::vector<uint32_t>& byte_offsets) {
  std::map<int, std::map<uint32_t, int>> words;  // bank -> word -> uses
  for (uint32_t o : byte_offsets) words[(o / 4) % 32][o / 4]++;
  size_t most = 0;
  for (const auto& [bank, w] : words) most = std::max(most, w.size());
  return static_cast<int>(most);
}

template <int D, Fp8Operand kOperand>
void expect_conflict_free() {
  using S = Fp8QuantShape<D, kOperand>;
  const std::string name = "D " + std::to_string(D) + " operand " + std::to_string(static_cast<int>(kOperand));
  for (int warp = 0; warp < S::kWarps; ++warp) {
    if constexpr (kOperand == Fp8Operand::kV) {
      // Store k of group g: lane's word of column col + (k + first) % 8, first = (col / 8) % 8.
      for (int g = 0; g < S::kRows; g += 4)
        for (int k = 0; k < 8; ++k) {
          std::vector<uint32_t> words;
          for (int lane = 0; lane < 32; ++lane) {
            int row, col;
            S::place(32 * warp + lane, g, row, col);
            const int d = col + (k + (col / 8) % 8) % 8;
            words.push_back(fp8_tile_offset(d, fp8_pv_slot(row), D, kFp8KvTileRows));
          }
          EXPECT_EQ(wavefronts(words), 1) << name << ": warp " << warp << " group " << g << " store " << k;
        }
    } else {
      for (int i = 0; i < S::kRows; ++i) {  // 8 bytes a lane: 256 bytes, 2 wavefronts at best
        std::vector<uint32_t> bytes;
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < 8; ++e) bytes.push_back(kernel_offset<D, kOperand>(32 * warp + lane, i, e));
        EXPECT_EQ(wavefronts(bytes), 2) << name << ": warp " << warp << " load " << i;
      }
    }
  }
}

TEST(Fp8QuantShape, SharedMemoryStoresAreBankConflictFree) {
  for_every_shape([](auto D, auto operand) { expect_conflict_free<D(), operand()>(); });
}

}  // namespace
}  // namespace ft
