// The fixed order in which key blocks add into a dQ tile in the deterministic backward with dropout
// (kOrderedDq of flash_bwd_kernel.cuh and flash_bwd_wide_kernel.cuh): descending key blocks, each
// waiting on a per-(query tile, warp) counter until every non-empty block above it has added.
#pragma once

#include "ops/attention_params.h"

namespace ft::cuda::flash {

// Whether dq_blocks_above has a closed form (dense or causal), so one lane may call it alone.
// kDocMask: attention_params.h.
template <bool kDocMask>
__device__ __forceinline__ bool dq_blocks_above_closed_form(const AttentionParams& p) {
  return p.block_size == 0 && (!kDocMask || p.doc_start == nullptr);
}

// The number of key blocks above n_block whose tile with query rows [m0, m1) of batch b is
// non-empty: how many adds into that dQ tile precede this block's in the deterministic
// (descending) order. Called by a whole warp (the block-sparse and document masks count 32 key
// blocks per step with a ballot).
template <bool kDocMask>
__device__ __forceinline__ int dq_blocks_above(const AttentionParams& p, int b, int m0, int m1, int n_block,
                                               int n_blocks, int block_n, int lane) {
  if (dq_blocks_above_closed_form<kDocMask>(p)) {
    const int last = p.causal ? min(n_blocks - 1, (m1 - 1) / block_n) : n_blocks - 1;
    return max(0, last - n_block);
  }
  int count = 0;
  for (int base = n_block + 1; base < n_blocks; base += 32) {
    const int nb = base + lane;
    const int n0 = nb * block_n, n1 = min(n0 + block_n, p.T);
    const bool live = nb < n_blocks && attention_tile_kind<kDocMask>(p, b, m0, m1, n0, n1) != kTileEmpty;
    count += __popc(__ballot_sync(0xffffffffu, live));
  }
  return count;
}

}  // namespace ft::cuda::flash
