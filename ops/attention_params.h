// Plain-old-data arguments of the attention kernels (flash and naive, CUDA and CPU references),
// and the one definition of which (query, key) pairs attend, shared by all of them.
//
// Layout: q, o, dout, dq are (B, T, H, D) and k, v, dk, dv (B, T, H_kv, D) with arbitrary element
// strides for batch, time (row) and head; the last dim D is contiguous. So q, k, v may be strided slices of a fused
// (B, T, 3*H*D) qkv buffer. lse and dsum are fp32 (B, H, T) contiguous. dq_accum is an fp32
// workspace of the flash backward (dQ is accumulated there; its own tile layout and size:
// ops/cuda/attention/flash_dq_accum.cuh, flash_attention_backward_workspace).
//
// Grouped-query attention (GQA; multi-query attention is H_kv = 1): H is a multiple of H_kv and
// query head h reads K/V head attention_kv_head(p, h) = h / (H / H_kv). The kernels themselves only
// read K/V through that map; dK and dV of a group are sums over its query heads, which the ops front
// door forms (ops/attention.cpp: the kernels write per-query-head partials into a (B, T, H, D)
// workspace, then a fixed-order fp32 sum). H_kv = 0 means H_kv = H, so code that fills the struct
// without knowing GQA keeps meaning multi-head attention.
//
// Kernels assert, they do not validate: the ops front door checks D in {64, 128, 256}, strides that are
// multiples of 8 elements (16-byte rows for cp.async), 16-byte aligned base pointers, T >= 1.
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"
#include "core/macros.h"
#include "core/stream.h"

namespace ft {

// kF32: naive attention only (CUDA naive and the CPU references); the flash kernels take 16-bit.
enum class AttentionDType : int { kBF16 = 0, kF16 = 1, kF32 = 2 };

struct AttentionParams {
  // Forward.
  const void* q = nullptr;  // (B, T, H, D)
  const void* k = nullptr;  // (B, T, H_kv, D)
  const void* v = nullptr;  // (B, T, H_kv, D)
  void* o = nullptr;        // (B, T, H, D)
  float* lse = nullptr;     // (B, H, T) natural-log log-sum-exp of the scaled, masked, undropped scores
  // Backward.
  const void* dout = nullptr;  // (B, T, H, D)
  void* dq = nullptr;          // (B, T, H, D)
  void* dk = nullptr;          // (B, T, H_kv, D); the kernels: (B, T, H, D) per-query-head partials
  void* dv = nullptr;          // (B, T, H_kv, D); the kernels: (B, T, H, D) per-query-head partials
  float* dsum = nullptr;       // (B, H, T) D = rowsum(dO * O), written by the backward preprocess
  float* dq_accum = nullptr;   // fp32 workspace (flash_dq_accum.cuh), zeroed by the backward preprocess

  // Element strides (batch, time, head) of each (B, T, H or H_kv, D) tensor.
  int64_t q_batch_stride = 0, q_row_stride = 0, q_head_stride = 0;
  int64_t k_batch_stride = 0, k_row_stride = 0, k_head_stride = 0;
  int64_t v_batch_stride = 0, v_row_stride = 0, v_head_stride = 0;
  int64_t o_batch_stride = 0, o_row_stride = 0, o_head_stride = 0;
  int64_t do_batch_stride = 0, do_row_stride = 0, do_head_stride = 0;
  int64_t dq_batch_stride = 0, dq_row_stride = 0, dq_head_stride = 0;
  int64_t dk_batch_stride = 0, dk_row_stride = 0, dk_head_stride = 0;
  int64_t dv_batch_stride = 0, dv_row_stride = 0, dv_head_stride = 0;

  int B = 0, H = 0, T = 0, D = 0;
  int H_kv = 0;  // K/V heads; 0 means H (multi-head attention). H % H_kv == 0.
  float softmax_scale = 1.f;
  bool causal = false;
  AttentionDType dtype = AttentionDType::kBF16;

  // Dropout on P (after normalisation); threshold 0 = off. slice = b * H + h (dropout_mask.h), so a
  // call consumes B * H Philox offsets.
  DropoutParams dropout;

  // Block-sparse mode; block_size 0 = dense. With qb = row / block_size, kb = col / block_size,
  // key block kb is visible from query block qb iff (qb - window_blocks < kb <= qb) -- the diagonal
  // block and the window_blocks - 1 before it -- or kb < global_blocks. `causal` additionally
  // masks col > row elementwise.
  int block_size = 0, window_blocks = 0, global_blocks = 0;

  // Document mask; nullptr = off. (B, T) int32, contiguous: doc_start[b * T + row] is the first
  // token of the document holding query `row` of batch b, so key col is visible only when
  // col >= doc_start[b * T + row]. Contract (the front door checks what it cheaply can): causal
  // (a key after the row's document would need a document end as well), every value in [0, row],
  // and non-decreasing along each row of the batch -- the tile kinds below rely on that.
  const int* doc_start = nullptr;
};

// Sets the strides of a contiguous (B, T, H, D) tensor.
struct BthdStrides {
  int64_t batch, row, head;
};
inline BthdStrides contiguous_bthd_strides(int T, int H, int D) {
  return {static_cast<int64_t>(T) * H * D, static_cast<int64_t>(H) * D, static_cast<int64_t>(D)};
}

// K/V heads of p (H_kv, or H when H_kv is 0) and query heads per K/V head.
FT_HOST_DEVICE int attention_kv_heads(const AttentionParams& p) { return p.H_kv > 0 ? p.H_kv : p.H; }
FT_HOST_DEVICE int attention_group_size(const AttentionParams& p) { return p.H / attention_kv_heads(p); }
// The K/V head that query head h reads. Multi-head attention skips the division.
FT_HOST_DEVICE int attention_kv_head(const AttentionParams& p, int h) {
  return p.H_kv > 0 && p.H_kv != p.H ? h / (p.H / p.H_kv) : h;
}

// kDocMask (the mask functions below): true tests p.doc_start at run time (the CPU references, the
// naive kernels, the flash kernels' document-mask instantiations); false promises p.doc_start ==
// nullptr and compiles no document-mask code at all. The flash kernels without the mask take
// false: the runtime test alone, never taken, cost their D = 64 tiles registers and spills (ptxas,
// sm_90a: up to 100 spill bytes a kernel) and 1-5% of their time (bench/attention/NOTES.md, session 11).

// The first key of query `row`'s document in batch b (0 without a document mask). Rows past T (the
// padding rows of a partial tile, whose result nobody reads) read row T - 1's, never past the array.
template <bool kDocMask = true>
FT_HOST_DEVICE int attention_doc_start(const AttentionParams& p, int b, int row) {
  if constexpr (!kDocMask) return 0;
  else return p.doc_start ? p.doc_start[static_cast<int64_t>(b) * p.T + (row < p.T ? row : p.T - 1)] : 0;
}

// Whether query `row` of batch b attends to key `col` (both < T).
template <bool kDocMask = true>
FT_HOST_DEVICE bool attention_allowed(const AttentionParams& p, int b, int row, int col) {
  if (p.causal && col > row) return false;
  if constexpr (kDocMask)
    if (p.doc_start && col < attention_doc_start(p, b, row)) return false;
  if (p.block_size > 0) {
    const int qb = row / p.block_size, kb = col / p.block_size;
    return (kb <= qb && kb > qb - p.window_blocks) || kb < p.global_blocks;
  }
  return true;
}

// What a tile of rows [m0, m1) x cols [n0, n1) (non-empty, clamped to T) of batch b looks like under
// the mask. Conservative: kTileFull means every pair attends (no elementwise mask needed); kTileEmpty
// means no pair attends (the tile is skipped); kTilePartial may in rare cases be full or empty.
// With a document mask it reads two doc_start values (rows m0 and m1 - 1: the smallest and largest
// start of the tile's rows, doc_start being non-decreasing); without one, nothing.
enum AttentionTileKind : int { kTileEmpty = 0, kTilePartial = 1, kTileFull = 2 };

template <bool kDocMask = true>
FT_HOST_DEVICE int attention_tile_kind(const AttentionParams& p, int b, int m0, int m1, int n0, int n1) {
  if (p.causal && n0 > m1 - 1) return kTileEmpty;
  bool full = !(p.causal && n1 - 1 > m0);
  if (kDocMask && p.doc_start) {
    if (n1 - 1 < attention_doc_start(p, b, m0)) return kTileEmpty;  // every key before every row's document
    full = full && n0 >= attention_doc_start(p, b, m1 - 1);          // every key inside every row's document
  }
  if (p.block_size > 0) {
    const int bs = p.block_size, W = p.window_blocks, G = p.global_blocks;
    const int qa = m0 / bs, qz = (m1 - 1) / bs, ka = n0 / bs, kz = (n1 - 1) / bs;
    // Some qb in [qa, qz] with some kb in [ka, kz], qb - W < kb <= qb:
    const int lo = qa > ka ? qa : ka;
    const int hi = qz < kz + W - 1 ? qz : kz + W - 1;
    const bool window_any = W > 0 && lo <= hi;
    const bool global_any = ka < G;
    if (!window_any && !global_any) return kTileEmpty;
    const bool window_all = kz <= qa && ka > qz - W;
    const bool global_all = kz < G;
    full = full && (window_all || global_all);
  }
  return full ? kTileFull : kTilePartial;
}

}  // namespace ft
