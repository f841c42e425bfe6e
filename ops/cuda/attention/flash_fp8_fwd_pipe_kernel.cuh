// FP8 attention forward with FlashAttention-3's intra-warpgroup overlap (the `pipe` variant): the
// same arithmetic as flash_fp8_fwd_kernel.cuh, scheduled so the tensor cores work while the ALUs
// do the softmax. Per key tile n, each warpgroup
//   1. issues S_{n+1} = Q K_{n+1}^T (asynchronous; into the other of two S accumulators),
//   2. does tile n's scaling, masking and online softmax on S_n (ready since step 5 of tile n - 1),
//      under O += P_{n-1} V_{n-1} (issued in step 4 of tile n - 1) and S_{n+1},
//   3. waits for O += P_{n-1} V_{n-1} (wgmma groups retire in order: wait_group 1 leaves S_{n+1}),
//      then rescales O,
//   4. packs P_n and issues O += P_n V_n,
//   5. waits for S_{n+1} (wait_group 1 leaves P_n V_n in flight).
// The two S accumulators swap roles every tile (the loop body runs twice per iteration with the
// arrays exchanged, so no register copies). Registers: 2 x 64 (S) + D / 2 (O) + 16 (P) per thread,
// which fits D = 64 and 128 (the launcher falls back to the plain kernel at D = 256).
// Shared memory: at tile n the tensor cores read V_{n-1}, V_n and K_{n+1} while tile n + 2 loads,
// so four K/V stages: the load of tile n + 2 (issued after the __syncthreads that opens tile n)
// overwrites tile n - 2, whose last product every warpgroup waited for during tile n - 1.
#pragma once

#include "ops/cuda/attention/flash_fp8_fwd_common.cuh"

namespace ft::cuda::flash {

template <class Kt>
__global__ void __launch_bounds__(Kt::kNThreads, Kt::kMinBlocks)
    flash_fp8_fwd_pipe_kernel(const Fp8AttentionParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(Kt::kPipelined && Kt::kStages == 4, "the pipelined kernel needs four K/V stages");
  constexpr int D = Kt::kHeadDim, BN = Kt::kBlockN;
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const Fp8FwdSmem<Kt> s(smem_raw);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
  const Fp8FwdBlock<Kt> blk(p, wg);
  if (blk.empty()) return;
  const int n_end = blk.n_end;

  fp8_load_q(s, blk, tid);
  fp8_load_keys(s, blk, 0, tid);
  cp_async_commit();
  if (n_end > 1) fp8_load_keys(s, blk, 1, tid);
  cp_async_commit();

  Fp8FwdRows<Kt> rows(blk);
  const int warp_row0 = warp * 16;  // this warp's first row in the CTA
  const uint32_t q_base = smem_u32(s.q) + wg * kFp8QTileRows * D;

  float s_a[BN / 8][4], s_b[BN / 8][4];
  cp_async_wait<1>();  // Q and tile 0: this thread's copies
  fence_proxy_async_smem();
  __syncthreads();
  fp8_issue_qk(s_a, s, q_base, 0);
  wgmma_wait<0>();
  reg_fence(s_a);

  // Tile n: cur holds S_n (complete). last: no S_{n+1}; otherwise next receives it. The last tile
  // is peeled off the loop (`last` is a constant at every call, folded after inlining) so that
  // every wgmma issue and wait_group is unconditional: ptxas serialises all wgmmas (C7514) when
  // it cannot match waits to groups along every path.
  auto tile = [&](const bool last, float (&cur)[BN / 8][4], float (&next)[BN / 8][4], int n) {
    cp_async_wait<0>();       // tile n + 1 landed: this thread's copies
    fence_proxy_async_smem();  // ... visible to the tensor cores
    __syncthreads();           // everyone's copies; every warpgroup is done with tile n - 2's stage
    if (n + 2 < n_end) fp8_load_keys(s, blk, n + 2, tid);
    cp_async_commit();
    if (!last) fp8_issue_qk(next, s, q_base, n + 1);

    rows.softmax(cur, blk, p.causal, n, blk.m0 + warp_row0, lane);

    if (last)
      wgmma_wait<0>();
    else
      wgmma_wait<1>();  // O += P_{n-1} V_{n-1} done; S_{n+1} may run on
    rows.fence();
    rows.rescale_o();
    rows.issue_pv(cur, s, n);
    if (last) {
      wgmma_wait<0>();
      rows.fence();
    } else {
      wgmma_wait<1>();  // S_{n+1} done; O += P_n V_n may run on
      reg_fence(next);
    }
  };
  int n = 0;
  for (; n + 2 < n_end; n += 2) {
    tile(false, s_a, s_b, n);
    tile(false, s_b, s_a, n + 1);
  }
  if (n + 1 < n_end) {
    tile(false, s_a, s_b, n);
    tile(true, s_b, s_a, n + 1);
  } else {
    tile(true, s_a, s_b, n);
  }
  rows.store(s, blk, p, warp_row0, lane);
#else
  __trap();  // built without sm_90a: the launcher refuses such devices before launching
#endif
}

}  // namespace ft::cuda::flash
