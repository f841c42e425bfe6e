// FP8 (e4m3) attention forward on Hopper wgmma (sm_90a), inference only (no lse, no dropout).
//
// Inputs are the quantiser's tile images (ops/attention_fp8_params.h): each CTA copies its Q tiles
// and streams the key tiles (K and V^T, 128 keys) through two shared-memory stages with plain
// 16-byte cp.async copies -- the images are already in the swizzled layout the descriptors read.
// Per 128-key tile, warpgroup g (its own 64 query rows and Q scale):
//   S = Q K^T        wgmma m64n128k32 e4m3, A = Q image, B = K image (both shared memory)
//   x = S * softmax_scale * log2(e) * q_scale * k_scale[tile]  (the scales fold into one factor,
//                    applied in exp2's argument; the row maximum is taken on S)
//   online softmax in log2 units; P = 2^(x - m + 8) = 256 p, in [0, 256]
//   O += P V         wgmma m64nDk32 e4m3, A = P packed from the S accumulator into registers
//                    (pack_p_fragment; the V^T key order makes that lane-local), B = V^T image
//   row sums         FADDs of the unrounded P (plain); with Kt::kTileProducts (wg1occ4, wg1occ3)
//                    L = P 1, wgmma m64n8k32 with the same A and a tile of e4m3 ones as B: the
//                    sums of the rounded P, on the tensor cores
// O is kept in units of the current tile's V scale: before a tile's O += P V, O is multiplied by
// alpha (the max rescale) times v_scale[previous] / v_scale[tile] (kTileProducts: P V goes into
// registers of its own and O = O * that + P V once it retires, L likewise with alpha); the
// epilogue multiplies by the last V scale over the row sum (the 256 cancels).
// This is the simplest schedule (waits for each product; a __syncthreads per key tile), shared by
// the plain variant (2 warpgroups), wg1occ4 and wg1occ3 (1 warpgroup, 4 or 3 CTAs per SM:
// Kt::kWarpGroups, Kt::kMinBlocks; the defaults at D = 64 and 128); flash_fp8_fwd_pipe_kernel.cuh
// overlaps the softmax with the products within a warpgroup. The CPU emulation
// (ops/cpu/attention_fp8_reference.h) does the same arithmetic in float64; the shared pieces are in
// flash_fp8_fwd_common.cuh.
#pragma once

#include "ops/cuda/attention/flash_fp8_fwd_common.cuh"

namespace ft::cuda::flash {

template <class Kt>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocks) flash_fp8_fwd_kernel(const Fp8AttentionParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(!Kt::kPipelined, "the pipelined traits go to flash_fp8_fwd_pipe_kernel");
  constexpr int D = Kt::kHeadDim, BN = Kt::kBlockN;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const Fp8FwdSmem<Kt> s(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
  const Fp8FwdBlock<Kt> blk(p, wg);
  if (blk.empty()) return;

  fp8_fill_ones(s, tid);
  if constexpr (Kt::kBulkLoads) {
    if (tid == 0) {
      for (int i = 0; i < Kt::kStages; ++i) mbarrier_init(&s.bars[i], 1);
      fence_mbarrier_init();
    }
    fence_proxy_async_smem();  // the ones tile's generic stores, for the tensor cores
    __syncthreads();           // the mbarriers initialised before anyone waits on them
    if (tid == 0) fp8_bulk_load_keys(s, blk, 0, /*with_q=*/true);
  } else {
    fp8_load_q(s, blk, tid);
    fp8_load_keys(s, blk, 0, tid);
    cp_async_commit();
  }

  Fp8FwdRows<Kt> rows(blk);
  const int warp_row0 = warp * 16;  // this warp's first row in the CTA
  const uint32_t q_base = smem_u32(s.q) + wg * kFp8QTileRows * D;

  for (int n = 0; n < blk.n_end; ++n) {
    if constexpr (Kt::kBulkLoads) {
      mbarrier_wait<false>(&s.bars[n % Kt::kStages], (n / Kt::kStages) & 1);  // tile n (and Q) landed
      __syncthreads();  // every warpgroup is done with tile n - 1's stage
      if (tid == 0 && n + 1 < blk.n_end) fp8_bulk_load_keys(s, blk, n + 1, false);
    } else {
      cp_async_wait<0>();       // tile n (and Q) landed: this thread's copies
      fence_proxy_async_smem();  // ... visible to the tensor cores
      __syncthreads();           // everyone's copies; every warpgroup is done with tile n - 1's stage
      if (n + 1 < blk.n_end) fp8_load_keys(s, blk, n + 1, tid);
      cp_async_commit();
    }

    float acc_s[BN / 8][4];
    fp8_issue_qk(acc_s, s, q_base, n);
    wgmma_wait<0>();
    reg_fence(acc_s);

    rows.softmax(acc_s, blk, p.causal, n, blk.m0 + warp_row0, lane);
    rows.rescale_o();
    rows.issue_pv(acc_s, s, n);
    wgmma_wait<0>();
    rows.fence();
    rows.retire();
  }
  rows.store(s, blk, p, warp_row0, lane);
#else
  __trap();  // built without sm_90a: the launcher refuses such devices before launching
#endif
}

}  // namespace ft::cuda::flash
