// The pieces every FP8 attention forward kernel shares (flash_fp8_fwd_kernel.cuh, the plain and
// wide/occupancy forms; flash_fp8_fwd_pipe_kernel.cuh, the intra-warpgroup pipelined form): the
// traits, where a CTA's rows and key tiles are, the tile copies, the softmax arithmetic of one key
// tile (the CPU emulation, ops/cpu/attention_fp8_reference.h, does the same in float64), the two
// products and the epilogue. The kernels differ only in when they issue and wait for the products.
#pragma once

#include <cfloat>
#include <cmath>

#include "ops/attention_fp8_params.h"
#include "ops/cuda/attention/flash_fp8_wgmma.cuh"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"
#include "ops/cuda/attention/flash_tma.cuh"
#include "ops/cuda/attention/flash_wgmma.cuh"

namespace ft::cuda::flash {

// kWarpGroups consumer warpgroups (64 query rows, one Q tile, each); kMinBlocks CTAs per SM asked of
// ptxas (__launch_bounds__: 2 caps registers at 65536 / (2 * threads)); kPipelined: the kernel keeps
// S of the next tile in flight under this tile's softmax, which needs four K/V stages (below);
// kTileProducts (the plain kernel only; wg1occ4 at D = 64, wg1occ3 at 128): each key tile's
// products start from zero in registers of their own -- P V, and the row sums L = P 1 on the tensor
// cores (an n8 product with a tile of e4m3 ones) instead of one FADD a score -- and are added into
// O and the fp32 row sums when they retire, the rescale riding on those FFMAs (Fp8FwdRows::retire).
// kBulkLoads (the plain kernel only): one thread copies each key tile's K and V^T images (and Q)
// with 1-D bulk copies completing on a per-stage mbarrier, instead of every thread issuing 16-byte
// cp.async copies and their address arithmetic (the images are contiguous and already swizzled).
template <int kHeadDim_, int kWarpGroups_, int kMinBlocks_ = 1, bool kPipelined_ = false, bool kTileProducts_ = false,
          bool kBulkLoads_ = false>
struct FlashFp8FwdTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr bool kTileProducts = kTileProducts_;
  static constexpr bool kBulkLoads = kBulkLoads_;
  static_assert(!(kBulkLoads && kPipelined_), "bulk loads are built for the plain kernel");
  static_assert(!(kTileProducts && kPipelined_), "the pipelined kernel retires a tile's products a tile later");
  static constexpr int kWarpGroups = kWarpGroups_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr bool kPipelined = kPipelined_;
  static constexpr int kBlockM = kFp8QTileRows * kWarpGroups;  // one Q tile (and scale) per warpgroup
  static constexpr int kBlockN = kFp8KvTileRows;
  static constexpr int kStages = kPipelined ? 4 : 2;
  static constexpr int kNThreads = 128 * kWarpGroups;
  static constexpr int kQBytes = kBlockM * kHeadDim;
  static constexpr int kTileBytes = kBlockN * kHeadDim;  // one K or one V^T tile image
  static constexpr int kStageBytes = kStages * 2 * kTileBytes;
  static constexpr int kOStride = kHeadDim + 8;          // bf16 elements per staged O row (16-byte rows)
  static constexpr int kOBytes = kBlockM * kOStride * 2;  // O staging reuses the K/V stages
  static constexpr int kOnesBytes = kTileProducts ? 8 * kBlockN : 0;  // L = P 1's B: 8 x kBlockN e4m3 ones
  static constexpr int kBarBytes = kBulkLoads ? 8 * kStages : 0;  // one mbarrier a stage, after the rest
  static constexpr int kSmemBytes =
      1024 /* alignment */ + kQBytes + kOnesBytes + (kStageBytes > kOBytes ? kStageBytes : kOBytes) + kBarBytes;
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "fp8 head dims");
  // One or two warpgroups: a CTA's rows then divide T_pad (a multiple of 128), so every CTA has all
  // its Q tiles. (Three and four, measured slower in session 12, needed a partial last block.)
  static_assert(kFp8PadRows % kBlockM == 0, "a CTA's rows divide the padded length: 1 or 2 warpgroups");
};

// Shared memory: Q images, the ones tile (kTileProducts), then kStages K images, then kStages V^T
// images (1 KB aligned: swizzle), then (kBulkLoads) the stages' mbarriers, past O's staging too.
template <class Kt>
struct Fp8FwdSmem {
  uint8_t *q, *ones, *k, *v;
  uint64_t* bars;
  __device__ explicit Fp8FwdSmem(uint8_t* raw) {
    const uint32_t a = smem_u32(raw);
    q = raw + (((a + 1023u) & ~1023u) - a);
    ones = q + Kt::kQBytes;
    k = ones + Kt::kOnesBytes;
    v = k + Kt::kStages * Kt::kTileBytes;
    bars = reinterpret_cast<uint64_t*>(k + (Kt::kStageBytes > Kt::kOBytes ? Kt::kStageBytes : Kt::kOBytes));
  }
};

// e4m3 1.0 (0x38) in every byte of the ones tile (kTileProducts), so that P times it is each row's
// sum of P in all 8 columns (a swizzled image of equal bytes is the same image). Written once by
// all threads with generic stores: the fence.proxy.async and __syncthreads before the first
// product publish it.
template <class Kt>
__device__ __forceinline__ void fp8_fill_ones(const Fp8FwdSmem<Kt>& s, int tid) {
  for (int i = tid; i < Kt::kOnesBytes / 4; i += Kt::kNThreads) reinterpret_cast<uint32_t*>(s.ones)[i] = 0x38383838u;
}

// One CTA's rows [m0, m0 + kBlockM) of head (b, h) and the key tiles it visits.
template <class Kt>
struct Fp8FwdBlock {
  int m0, T, T_pad, n_end;
  const uint8_t *q_img, *k_img, *v_img;
  const float *k_scale, *v_scale;
  float q_factor;  // softmax_scale * log2(e) * this warpgroup's Q scale
  __device__ Fp8FwdBlock(const Fp8AttentionParams& p, int wg) {
    constexpr int D = Kt::kHeadDim, BM = Kt::kBlockM, BN = Kt::kBlockN;
    T = p.T, T_pad = fp8_padded_rows(T);
    const int bh = blockIdx.y;
    m0 = (gridDim.x - 1 - blockIdx.x) * BM;  // the longest causal blocks first
    const int m1 = min(m0 + BM, T);
    n_end = p.causal ? (m1 - 1) / BN + 1 : (T + BN - 1) / BN;
    q_img = p.q + (static_cast<int64_t>(bh) * T_pad + m0) * D;
    k_img = p.k + static_cast<int64_t>(bh) * T_pad * D;
    v_img = p.v + static_cast<int64_t>(bh) * T_pad * D;
    k_scale = p.k_scale + static_cast<int64_t>(bh) * (T_pad / BN);
    v_scale = p.v_scale + static_cast<int64_t>(bh) * (T_pad / BN);
    const int q_tile = m0 / kFp8QTileRows + wg;
    q_factor = p.softmax_scale * kLog2e * p.q_scale[static_cast<int64_t>(bh) * (T_pad / kFp8QTileRows) + q_tile];
  }
  // Whole block in the padding (m0 >= T): nothing to do.
  __device__ bool empty() const { return m0 >= T; }
};

// bytes (a multiple of 16) from global to shared memory, issued by all kThreads threads.
template <int kThreads>
__device__ __forceinline__ void fp8_copy_async(uint8_t* dst, const uint8_t* src, int bytes, int tid) {
  for (int i = tid * 16; i < bytes; i += kThreads * 16) cp_async_16(smem_u32(dst + i), src + i, 16);
}

// Q images of the block's warpgroups.
template <class Kt>
__device__ __forceinline__ void fp8_load_q(const Fp8FwdSmem<Kt>& s, const Fp8FwdBlock<Kt>& blk, int tid) {
  fp8_copy_async<Kt::kNThreads>(s.q, blk.q_img, Kt::kQBytes, tid);
}

// K and V^T images of key tile n into stage n % kStages (the caller commits).
template <class Kt>
__device__ __forceinline__ void fp8_load_keys(const Fp8FwdSmem<Kt>& s, const Fp8FwdBlock<Kt>& blk, int n, int tid) {
  const int stage = n % Kt::kStages;
  const int64_t src = static_cast<int64_t>(n) * Kt::kTileBytes;
  fp8_copy_async<Kt::kNThreads>(s.k + stage * Kt::kTileBytes, blk.k_img + src, Kt::kTileBytes, tid);
  fp8_copy_async<Kt::kNThreads>(s.v + stage * Kt::kTileBytes, blk.v_img + src, Kt::kTileBytes, tid);
}

// kBulkLoads, thread 0 only: key tile n's K and V^T images (and with_q the block's Q images) into
// stage n % kStages, announced on that stage's mbarrier (its one arrival is this thread's).
template <class Kt>
__device__ __forceinline__ void fp8_bulk_load_keys(const Fp8FwdSmem<Kt>& s, const Fp8FwdBlock<Kt>& blk, int n,
                                                   bool with_q) {
  const int stage = n % Kt::kStages;
  uint64_t* bar = &s.bars[stage];
  mbarrier_arrive_expect_tx(bar, 2 * Kt::kTileBytes + (with_q ? Kt::kQBytes : 0));
  if (with_q) bulk_load(s.q, blk.q_img, Kt::kQBytes, bar);
  const int64_t src = static_cast<int64_t>(n) * Kt::kTileBytes;
  bulk_load(s.k + stage * Kt::kTileBytes, blk.k_img + src, Kt::kTileBytes, bar);
  bulk_load(s.v + stage * Kt::kTileBytes, blk.v_img + src, Kt::kTileBytes, bar);
}

// Issues (and commits) S = Q K^T for key tile n: q_base is this warpgroup's Q image.
template <class Kt>
__device__ __forceinline__ void fp8_issue_qk(float (&acc_s)[Kt::kBlockN / 8][4], const Fp8FwdSmem<Kt>& s,
                                             uint32_t q_base, int n) {
  constexpr int D = Kt::kHeadDim, BN = Kt::kBlockN, kSwizzle = fp8_swizzle_bytes(D);
  const uint32_t k_base = smem_u32(s.k) + (n % Kt::kStages) * Kt::kTileBytes;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk)
    wgmma_e4m3_ss_n128(acc_s, fp8_desc<kSwizzle>(q_base + fp8_kstep_offset<kFp8QTileRows, D>(kk)),
                       fp8_desc<kSwizzle>(k_base + fp8_kstep_offset<BN, D>(kk)), kk > 0);
  wgmma_commit();
}

// Masks key tile n's raw scores S (QK^T of the quantised operands, before any scale): masked pairs
// and keys past T to -inf. row0: this warp's first row in the head (m0 + warp * 16). The scale
// factor is applied inside the softmax's exp2 argument (one FFMA), not here.
template <class Kt>
__device__ __forceinline__ void fp8_mask_scores(float (&acc_s)[Kt::kBlockN / 8][4], const Fp8FwdBlock<Kt>& blk,
                                                bool causal, int n, int row0, int lane) {
  constexpr int BN = Kt::kBlockN;
  const int n0 = n * BN;
  if (!(n0 + BN > blk.T || (causal && n0 + BN - 1 > blk.m0))) return;
#pragma unroll
  for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = row0 + (lane >> 2) + 8 * (e >> 1);
      const int col = n0 + nb * 8 + 2 * (lane & 3) + (e & 1);
      if (col >= blk.T || (causal && col > row)) acc_s[nb][e] = -INFINITY;
    }
}

// Online softmax of one tile (per row half: rows g and g + 8 of this warp) on raw scores S, whose
// log2-unit scores are x = S * factor (factor = softmax scale * log2(e) * q_scale * k_scale[n] > 0:
// the quantiser's scales are positive, 1 for an all-zero tile). The row maximum is taken on S and
// scaled once (max(S) * factor = max(S * factor): rounding is monotonic), and each element costs
// one FFMA into exp2 instead of a multiply and a subtract. New row maxima; acc_s becomes
// P = 2^(x - m + 8) = 256 p; alpha[half] the factor the old O and row sum shrink by. kSums: this
// lane's part of each row sum, row_sum = row_sum * alpha + the tile's P (unrounded); without it
// the tensor cores add the tile's rounded P (kTileProducts).
template <int BN, bool kSums>
__device__ __forceinline__ void fp8_softmax_tile(float (&acc_s)[BN / 8][4], float factor, float (&row_max)[2],
                                                 float (&row_sum)[2], float (&alpha)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float mx = fmaxf(row_max[half], quad_row_max(acc_s, half, -INFINITY) * factor);
    const float m_use = mx == -INFINITY ? 0.f : mx;  // a row with nothing visible yet: P = 0
    alpha[half] = fast_exp2(row_max[half] - m_use);  // 0 while row_max = -inf
    row_max[half] = mx;
    const float neg_shift = kFp8PScaleLog2 - m_use;  // P = 2^(x - m + 8) = 256 p
    float sum = 0.f;
#pragma unroll
    for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
      for (int e = 2 * half; e < 2 * half + 2; ++e) {
        acc_s[nb][e] = fast_exp2(fmaf(acc_s[nb][e], factor, neg_shift));
        if constexpr (kSums) sum += acc_s[nb][e];
      }
    if constexpr (kSums) row_sum[half] = row_sum[half] * alpha[half] + sum;
  }
}

// O (in units of the previous tile's V scale) -> units of this tile's: times alpha * unit ratio.
template <int D>
__device__ __forceinline__ void fp8_rescale_o(float (&acc_o)[D / 8][4], const float (&o_factor)[2]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll
    for (int dj = 0; dj < D / 8; ++dj) {
      acc_o[dj][2 * half] *= o_factor[half];
      acc_o[dj][2 * half + 1] *= o_factor[half];
    }
  }
}

// Issues (and commits) O += P V for key tile n, P packed from acc_s into e4m3 A fragments (one per
// 32 keys; their registers stay live until the product is waited for). kTileProducts: acc_o is the
// tile's own accumulator (starting from zero), and the tile's row sums L = P 1 go into acc_l (an n8
// product with the ones tile: the sums of the rounded P that P V used). L must start from zero
// every tile: fed back across tiles, the FP8 products' accumulation, which keeps fewer bits than
// fp32, dropped the small P of long rows (the outlier benchmark's RMSE rose 15-40% at T = 4096).
template <class Kt>
__device__ __forceinline__ void fp8_issue_pv(float (&acc_o)[Kt::kHeadDim / 8][4], float (&acc_l)[1][4],
                                             const float (&acc_s)[Kt::kBlockN / 8][4], const Fp8FwdSmem<Kt>& s,
                                             int n) {
  constexpr int D = Kt::kHeadDim, BN = Kt::kBlockN, kSwizzle = fp8_swizzle_bytes(BN);
  const uint32_t v_base = smem_u32(s.v) + (n % Kt::kStages) * Kt::kTileBytes, ones_base = smem_u32(s.ones);
  constexpr bool kFresh = Kt::kTileProducts;
  uint32_t pa[BN / 32][4];
#pragma unroll
  for (int kk = 0; kk < BN / 32; ++kk) pack_p_fragment(pa[kk], acc_s, kk);
#pragma unroll
  for (int kk = 0; kk < BN / 32; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) reg_fence(pa[kk][r]);
  reg_fence(acc_o);
  if constexpr (kFresh) reg_fence(acc_l);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BN / 32; ++kk) {
    wgmma_e4m3_rs<D>(acc_o, pa[kk], fp8_desc<kSwizzle>(v_base + fp8_kstep_offset<D, BN>(kk)), kFresh ? kk > 0 : 1);
    if constexpr (kFresh)
      wgmma_e4m3_rs<8>(acc_l, pa[kk], fp8_desc<kSwizzle>(ones_base + fp8_kstep_offset<8, BN>(kk)), kk > 0);
  }
  wgmma_commit();
}

// O = acc * v_unit / row sum (0 for a row with nothing visible), bf16, staged through shared
// memory (the K/V stages: the caller has waited for every copy and product and synchronised the
// CTA) for 16-byte stores of rows < T. row_sum: this lane's part of each row's sum (summed over the
// quad here), or with kTileProducts the whole sum already.
template <class Kt>
__device__ __forceinline__ void fp8_store_o(float (&acc_o)[Kt::kHeadDim / 8][4], float (&row_sum)[2],
                                            float v_unit, const Fp8FwdSmem<Kt>& s, const Fp8FwdBlock<Kt>& blk,
                                            const Fp8AttentionParams& p, int warp_row0, int lane) {
  constexpr int D = Kt::kHeadDim;
  normalize_rows<D, !Kt::kTileProducts>(acc_o, row_sum, v_unit);
  uint16_t* staged = reinterpret_cast<uint16_t*>(s.k);
  auto at = [&](int r, int c) { return staged + r * Kt::kOStride + c; };
  stage_rows<true, D>(acc_o, 1.f, warp_row0, at, lane);
  __syncwarp();
  const int bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  uint16_t* o = p.o + b * p.o_batch_stride + h * p.o_head_stride;
  store_staged_rows<16, D>(o, p.o_row_stride, warp_row0, blk.m0, blk.T, at, lane);
}

// What one thread keeps of its two rows across key tiles: O (in units of the last V scale added),
// the fp32 row sums (this lane's part, or with kTileProducts the whole rows' in every lane of the
// quad), the running row maxima, and the pending rescale from the last softmax (applied by the
// kernel once the previous O += P V has been waited for: rescale_o, or with kTileProducts retire).
// kTileProducts: the last tile's P V (acc_t) and L = P 1 (acc_l, a C fragment of the ones product:
// every column holds the row's sum).
template <class Kt>
struct Fp8FwdRows {
  static constexpr bool kTP = Kt::kTileProducts;
  float acc_o[Kt::kHeadDim / 8][4];
  float acc_t[kTP ? Kt::kHeadDim / 8 : 1][4];
  float acc_l[1][4];
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  float v_unit;  // O's unit: the V scale of the last tile added
  float o_factor[2], alpha[2];
  __device__ explicit Fp8FwdRows(const Fp8FwdBlock<Kt>& blk) : v_unit(blk.v_scale[0]) {
    zero_fragments(acc_o);
    if constexpr (kTP) {  // the products overwrite them (scale-d 0 at the first k step)
      zero_fragments(acc_t);
      zero_fragments(acc_l);
    }
  }

  // Tile n: acc_s from S to P (scores, mask, online softmax); row0 is this warp's first row in the head.
  __device__ __forceinline__ void softmax(float (&acc_s)[Kt::kBlockN / 8][4], const Fp8FwdBlock<Kt>& blk,
                                          bool causal, int n, int row0, int lane) {
    fp8_mask_scores(acc_s, blk, causal, n, row0, lane);
    const float v_s = blk.v_scale[n];
    const float unit_ratio = v_unit / v_s;
    v_unit = v_s;
    fp8_softmax_tile<Kt::kBlockN, !kTP>(acc_s, blk.q_factor * blk.k_scale[n], row_max, row_sum, alpha);
    o_factor[0] = alpha[0] * unit_ratio, o_factor[1] = alpha[1] * unit_ratio;
  }
  // Before O += P V of this tile is issued (the previous one has retired). kTileProducts: nothing,
  // retire() rescales.
  __device__ __forceinline__ void rescale_o() {
    if constexpr (!kTP) fp8_rescale_o<Kt::kHeadDim>(acc_o, o_factor);
  }
  __device__ __forceinline__ void issue_pv(const float (&acc_s)[Kt::kBlockN / 8][4], const Fp8FwdSmem<Kt>& s, int n) {
    if constexpr (kTP)
      fp8_issue_pv(acc_t, acc_l, acc_s, s, n);
    else
      fp8_issue_pv(acc_o, acc_l, acc_s, s, n);
  }
  // After a wait that retired this tile's products.
  __device__ __forceinline__ void fence() {
    reg_fence(acc_o);
    if constexpr (kTP) {
      reg_fence(acc_t);
      reg_fence(acc_l);
    }
  }
  // kTileProducts, after fence(): O = O * factor + tile's P V, L = L * alpha + tile's P 1.
  __device__ __forceinline__ void retire() {
    if constexpr (kTP) {
      row_sum[0] = fmaf(row_sum[0], alpha[0], acc_l[0][0]);
      row_sum[1] = fmaf(row_sum[1], alpha[1], acc_l[0][2]);
#pragma unroll
      for (int dj = 0; dj < Kt::kHeadDim / 8; ++dj)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[dj][e] = fmaf(acc_o[dj][e], o_factor[e >> 1], acc_t[dj][e]);
    }
  }

  // After the last product was waited for: every thread's copies, then the CTA (the K/V stages
  // become O's staging), then O out.
  __device__ __forceinline__ void store(const Fp8FwdSmem<Kt>& s, const Fp8FwdBlock<Kt>& blk,
                                        const Fp8AttentionParams& p, int warp_row0, int lane) {
    cp_async_wait<0>();
    __syncthreads();
    fp8_store_o(acc_o, row_sum, v_unit, s, blk, p, warp_row0, lane);
  }
};

}  // namespace ft::cuda::flash
