// FP8 (e4m3) attention forward: the plain-old-data arguments of its kernels and the byte layout of
// the quantised Q, K, V that the quantiser writes and the attention kernel reads (CPU emulation,
// CUDA quantiser, CUDA attention and tests all use the functions here, so they cannot disagree).
//
// Quantised tensors are sequences of tile *images*: one tile of one (batch, head) is exactly the
// bytes its shared-memory copy must hold, so the attention kernel loads it with flat 16-byte copies
// and points wgmma descriptors at it; all layout knowledge lives in the quantiser.
//   Q: tiles of kFp8QTileRows = 64 rows x D  (K-major: rows = query, bytes = D), one warpgroup's rows
//   K: tiles of kFp8KvTileRows = 128 rows x D (K-major: rows = key,   bytes = D)
//   V: tiles of D rows x 128 keys, i.e. V^T  (K-major for P V: rows = d, bytes = keys), keys in the
//      order fp8_pv_key (below) so that P goes from the S accumulator into wgmma's A registers with
//      no shuffles.
// Each (batch, head) owns T_pad = round_up(T, kFp8PadRows) rows of each; rows >= T are zeros. One
// fp32 scale per tile (block quantisation) or the same scale in every tile (per-tensor): the value
// a tile holds is e4m3(x / scale) with x the (Hadamard-rotated) bf16 input.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft {

constexpr int kFp8QTileRows = 64;    // one Q scale per 64 query rows (one warpgroup of the kernel)
constexpr int kFp8KvTileRows = 128;  // one K and one V scale per 128 keys (the kernel's key tile)
constexpr int kFp8PadRows = 128;     // T_pad: a multiple of both tiles
constexpr float kE4m3Max = 448.f;    // largest finite e4m3 (e4m3fn: S.1111.110)
// P in [0, 1] goes into e4m3 as 256 P (FlashAttention-3's "max offset" 8: exp2(s - m + 8)): a power
// of two, so the scaling is exact, and values down to 2^-17 stay representable. The row sum is
// taken over the same 256 P (rounded to e4m3 where the tensor cores add it, the default schedules
// at D = 64 and 128; unrounded elsewhere), so the factor cancels in O = sum(P V) / sum(P).
constexpr float kFp8PScale = 256.f;
constexpr float kFp8PScaleLog2 = 8.f;

FT_HOST_DEVICE constexpr int fp8_padded_rows(int T) { return (T + kFp8PadRows - 1) / kFp8PadRows * kFp8PadRows; }

// Swizzle width of a K-major tile whose rows hold row_bytes bytes: 128-byte swizzle when the rows
// are 128-byte multiples (D = 128, 256 and the 128-key V^T rows), else 64-byte (D = 64). The tile
// is stored as row_bytes / sw column blocks of rows x sw bytes each (the wgmma "atoms" of 8 rows x
// sw bytes stacked along the rows, 8 sw bytes apart), and inside a block the 16-byte chunk bits
// (4..) of the offset are XORed with the 8-row-group-relative row bits (7..): CuTe's Swizzle<3,4,3>
// (sw = 128) and Swizzle<2,4,3> (sw = 64), which is what wgmma's 128B / 64B modes read.
FT_HOST_DEVICE constexpr int fp8_swizzle_bytes(int row_bytes) { return row_bytes % 128 == 0 ? 128 : 64; }

// Byte offset of (row, col) in a K-major tile image of `rows` rows x row_bytes bytes.
FT_HOST_DEVICE uint32_t fp8_tile_offset(int row, int col, int rows, int row_bytes) {
  const int sw = fp8_swizzle_bytes(row_bytes);
  const int block = col / sw;
  uint32_t o = static_cast<uint32_t>(row * sw + col % sw);
  o ^= ((o >> 7) & static_cast<uint32_t>(sw / 16 - 1)) << 4;
  return static_cast<uint32_t>(block * rows * sw) + o;
}

// Key order of a V^T tile. wgmma's e4m3 A fragment (m64k32, per warp 16 rows x 32 keys; lane =
// 4 g + c) holds in register 0 row g, keys 4c .. 4c+3 (byte i = key 4c + i); register 1 row g + 8,
// the same keys; registers 2, 3 the same for keys 16 + 4c ... The fp32 S accumulator holds, for
// each n8 tile j, row g (elements 0, 1) and row g + 8 (2, 3) at keys 8j + 2c, 8j + 2c + 1. Packing
// the accumulator in order -- register 0 = row g of tiles 0 and 1 -- puts key 8 (i / 2) + 2c + i % 2
// where the A operand expects "key" 4c + i. Rather than move bytes between lanes, V^T stores in
// its column (A slot) s the key that slot really carries: within each 16-key group
//   slot bits (i1 i0 of i, c1 c0 of c): s = 4c + 2 i1 + i0  ->  key = 8 i1 + 2c + i0.
FT_HOST_DEVICE int fp8_pv_key(int slot) {
  return (slot & ~15) | (slot & 1) | (((slot >> 2) & 3) << 1) | (((slot >> 1) & 1) << 3);
}
// Inverse: the slot of V^T that holds key `key` (within its 128-key tile).
FT_HOST_DEVICE int fp8_pv_slot(int key) {
  return (key & ~15) | (key & 1) | (((key >> 1) & 3) << 2) | (((key >> 3) & 1) << 1);
}

// Byte offsets of element (t, d) of head slice (b, h) in the quantised tensors (T_pad rows per
// head; the tile images of one head are contiguous, heads (b * H + h) one after another).
FT_HOST_DEVICE int64_t fp8_q_offset(int bh, int t, int d, int T_pad, int D) {
  const int tile = t / kFp8QTileRows, r = t % kFp8QTileRows;
  return (static_cast<int64_t>(bh) * T_pad + static_cast<int64_t>(tile) * kFp8QTileRows) * D +
         fp8_tile_offset(r, d, kFp8QTileRows, D);
}
FT_HOST_DEVICE int64_t fp8_k_offset(int bh, int t, int d, int T_pad, int D) {
  const int tile = t / kFp8KvTileRows, r = t % kFp8KvTileRows;
  return (static_cast<int64_t>(bh) * T_pad + static_cast<int64_t>(tile) * kFp8KvTileRows) * D +
         fp8_tile_offset(r, d, kFp8KvTileRows, D);
}
FT_HOST_DEVICE int64_t fp8_v_offset(int bh, int t, int d, int T_pad, int D) {
  const int tile = t / kFp8KvTileRows, key = t % kFp8KvTileRows;
  return (static_cast<int64_t>(bh) * T_pad + static_cast<int64_t>(tile) * kFp8KvTileRows) * D +
         fp8_tile_offset(d, fp8_pv_slot(key), D, kFp8KvTileRows);
}

// Quantiser arguments: one bf16 (B, T, H, D) tensor (strided, last dim contiguous) -> tile images.
enum class Fp8Operand : int { kQ = 0, kK = 1, kV = 2 };
struct Fp8QuantParams {
  const uint16_t* x = nullptr;  // bf16 (B, T, H, D)
  int64_t batch_stride = 0, row_stride = 0, head_stride = 0;
  uint8_t* out = nullptr;  // (B * H, T_pad, D) bytes of tile images
  float* scales = nullptr;  // (B * H, T_pad / tile rows)
  // Per-tensor mode: the first launch (amax_only) atomically maxes every tile's |x| into *amax (zeroed
  // before), the second quantises every tile with it. Block mode: one launch, each tile its own.
  float* amax = nullptr;
  bool per_tensor = false;
  bool amax_only = false;
  // Hadamard rotation along D (Q and K only): x -> x diag(signs) H_D / sqrt(D), H_D the Sylvester
  // Walsh-Hadamard matrix; bit d of sign_bits[d / 32] set means the sign of d is -1.
  bool hadamard = false;
  uint32_t sign_bits[8] = {};
  Fp8Operand operand = Fp8Operand::kQ;
  int B = 0, H = 0, T = 0, D = 0;
};

// Attention kernel arguments.
struct Fp8AttentionParams {
  const uint8_t* q = nullptr;  // quantised as above
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  const float* q_scale = nullptr;  // (B * H, T_pad / 64)
  const float* k_scale = nullptr;  // (B * H, T_pad / 128)
  const float* v_scale = nullptr;  // (B * H, T_pad / 128)
  uint16_t* o = nullptr;           // bf16 (B, T, H, D), strided, last dim contiguous
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int B = 0, H = 0, T = 0, D = 0;
  float softmax_scale = 1.f;
  bool causal = false;
};

}  // namespace ft
