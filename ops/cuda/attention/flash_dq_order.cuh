// The fixed order in which key blocks add into a dQ tile in the ordered deterministic backward:
// descending key blocks in flash_bwd_kernel.cuh and flash_bwd_wide_kernel.cuh (kOrderedDq, with
// dropout), each waiting on a per-(query tile, warp) counter until every non-empty block above it has
// added; ascending ones in the warp-specialised backward (kOrdered), a counter per query tile.
#pragma once

#include "core/macros.h"
#include "ops/attention_params.h"

namespace ft::cuda::flash {

// Whether dq_blocks_above and dq_blocks_below have a closed form (dense or causal), so one lane may
// call them alone.
// kDocMask: attention_params.h.
template <bool kDocMask>
FT_HOST_DEVICE bool dq_blocks_closed_form(const AttentionParams& p) {
  return p.block_size == 0 && (!kDocMask || p.doc_start == nullptr);
}

// The warp-specialised backward's ordered dQ without the zeroing of dq_accum: where the counts have
// their closed form, key block 0 sees every query tile and adds first there (dq_blocks_below: 0
// blocks before it), so it stores its sums instead of adding them to zeros (the same bits but for
// the sign of a zero). Under a block-sparse mask block 0 may not see a tile, so the preprocess
// zeroes dq_accum as before. Host and device ask this one predicate.
FT_HOST_DEVICE bool ws_first_block_stores_dq(const AttentionParams& p) { return dq_blocks_closed_form<true>(p); }

// The key blocks in [lo, hi) whose tile with query rows [m0, m1) of batch b is non-empty, counted by
// a whole warp (32 key blocks a step, with a ballot).
template <bool kDocMask>
__device__ __forceinline__ int dq_live_blocks(const AttentionParams& p, int b, int m0, int m1, int lo, int hi,
                                              int block_n, int lane) {
  int count = 0;
  for (int base = lo; base < hi; base += 32) {
    const int nb = base + lane;
    const int n0 = nb * block_n, n1 = min(n0 + block_n, p.T);
    const bool live = nb < hi && attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileEmpty;
    count += __popc(__ballot_sync(0xffffffffu, live));
  }
  return count;
}

// The number of key blocks above n_block whose tile with query rows [m0, m1) of batch b is
// non-empty: how many adds into that dQ tile precede this block's in the deterministic
// (descending) order. Called by a whole warp (the block-sparse and document masks count with
// dq_live_blocks).
template <bool kDocMask>
__device__ __forceinline__ int dq_blocks_above(const AttentionParams& p, int b, int m0, int m1, int n_block,
                                               int n_blocks, int block_n, int lane) {
  if (dq_blocks_closed_form<kDocMask>(p)) {
    const int last = p.causal ? min(n_blocks - 1, (m1 - 1) / block_n) : n_blocks - 1;
    return max(0, last - n_block);
  }
  return dq_live_blocks<kDocMask>(p, b, m0, m1, n_block + 1, n_blocks, block_n, lane);
}

// The same count below n_block, for the ascending order of the warp-specialised backward's ordered
// dQ (flash_bwd_ws_kernel.cuh). Dense or causal, every block below a block that sees the tile sees
// it too: n_block of them.
template <bool kDocMask>
__device__ __forceinline__ int dq_blocks_below(const AttentionParams& p, int b, int m0, int m1, int n_block,
                                               int block_n, int lane) {
  if (dq_blocks_closed_form<kDocMask>(p)) return n_block;
  return dq_live_blocks<kDocMask>(p, b, m0, m1, 0, n_block, block_n, lane);
}

}  // namespace ft::cuda::flash
