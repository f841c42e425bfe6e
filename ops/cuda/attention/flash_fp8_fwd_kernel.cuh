// FP8 (e4m3) attention forward on Hopper wgmma (sm_90a), inference only (no lse, no dropout).
//
// Inputs are the quantiser's tile images (ops/attention_fp8_params.h): each CTA copies its Q tiles
// and streams the key tiles (K and V^T, 128 keys) through two shared-memory stages with plain
// 16-byte cp.async copies -- the images are already in the swizzled layout the descriptors read.
// Per 128-key tile, warpgroup g (its own 64 query rows and Q scale):
//   S = Q K^T        wgmma m64n128k32 e4m3, A = Q image, B = K image (both shared memory)
//   x = S * softmax_scale * log2(e) * q_scale * k_scale[tile]  (the scales fold into one factor)
//   online softmax in log2 units; P = 2^(x - m + 8) = 256 p, in [0, 256]
//   O += P V         wgmma m64nDk32 e4m3, A = P packed from the S accumulator into registers
//                    (pack_p_fragment; the V^T key order makes that lane-local), B = V^T image
// O is kept in units of the current tile's V scale: before a tile's O += P V, O is multiplied by
// alpha (the max rescale) times v_scale[previous] / v_scale[tile]; the epilogue multiplies by the
// last V scale over the row sum (of the unrounded 256 p, so the 256 cancels).
// The structure follows flash_fwd_wgmma_kernel.cuh in its simplest form (waits for each product);
// the CPU emulation (ops/cpu/attention_fp8_reference.h) does the same arithmetic in float64.
#pragma once

#include <cfloat>
#include <cmath>

#include "ops/attention_fp8_params.h"
#include "ops/cuda/attention/flash_fp8_wgmma.cuh"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"
#include "ops/cuda/attention/flash_wgmma.cuh"

namespace ft::cuda::flash {

template <int kHeadDim_, int kWarpGroups_>
struct FlashFp8FwdTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarpGroups = kWarpGroups_;
  static constexpr int kBlockM = kFp8QTileRows * kWarpGroups;  // one Q tile (and scale) per warpgroup
  static constexpr int kBlockN = kFp8KvTileRows;
  static constexpr int kStages = 2;
  static constexpr int kNThreads = 128 * kWarpGroups;
  static constexpr int kQBytes = kBlockM * kHeadDim;
  static constexpr int kTileBytes = kBlockN * kHeadDim;  // one K or one V^T tile image
  static constexpr int kOStride = kHeadDim + 8;          // bf16 elements per staged O row (16-byte rows)
  static constexpr int kSmemBytes = 1024 /* alignment */ + kQBytes + kStages * 2 * kTileBytes;
  static_assert(kBlockM * kOStride * 2 <= kStages * 2 * kTileBytes, "O staging fits in the K/V stages");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "fp8 head dims");
};

template <class Kt>
__global__ void __launch_bounds__(Kt::kNThreads, 1) flash_fp8_fwd_kernel(const Fp8AttentionParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int D = Kt::kHeadDim, BM = Kt::kBlockM, BN = Kt::kBlockN, NT = Kt::kNThreads;
  constexpr int kQkSwizzle = fp8_swizzle_bytes(D), kVSwizzle = fp8_swizzle_bytes(BN);

  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);  // swizzled images: 1 KB aligned
  uint8_t* sQ = smem;                                          // kWarpGroups Q images
  uint8_t* sK = sQ + Kt::kQBytes;                              // kStages K images
  uint8_t* sV = sK + Kt::kStages * Kt::kTileBytes;             // kStages V^T images

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, wg = warp / 4;
  const int T = p.T, T_pad = fp8_padded_rows(T);
  const int bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;  // the longest causal blocks first
  if (m0 >= T) return;                               // a 64-row block wholly in the padding
  const int m1 = min(m0 + BM, T);
  const int n_end = p.causal ? (m1 - 1) / BN + 1 : (T + BN - 1) / BN;

  const uint8_t* q_img = p.q + (static_cast<int64_t>(bh) * T_pad + m0) * D;
  const uint8_t* k_img = p.k + static_cast<int64_t>(bh) * T_pad * D;
  const uint8_t* v_img = p.v + static_cast<int64_t>(bh) * T_pad * D;
  const float* k_scale = p.k_scale + static_cast<int64_t>(bh) * (T_pad / BN);
  const float* v_scale = p.v_scale + static_cast<int64_t>(bh) * (T_pad / BN);
  const float q_scale = p.q_scale[static_cast<int64_t>(bh) * (T_pad / kFp8QTileRows) + m0 / kFp8QTileRows + wg];

  auto copy_bytes = [&](uint8_t* dst, const uint8_t* src, int bytes) {
    for (int i = tid * 16; i < bytes; i += NT * 16) cp_async_16(smem_u32(dst + i), src + i, 16);
  };
  auto load_keys = [&](int n) {
    const int stage = n % Kt::kStages;
    copy_bytes(sK + stage * Kt::kTileBytes, k_img + static_cast<int64_t>(n) * Kt::kTileBytes, Kt::kTileBytes);
    copy_bytes(sV + stage * Kt::kTileBytes, v_img + static_cast<int64_t>(n) * Kt::kTileBytes, Kt::kTileBytes);
  };
  copy_bytes(sQ, q_img, Kt::kQBytes);
  load_keys(0);
  cp_async_commit();

  float acc_o[D / 8][4];
  zero_fragments(acc_o);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  float v_unit = v_scale[0];  // O's unit: the V scale of the last tile added
  const float q_factor = p.softmax_scale * kLog2e * q_scale;
  const int warp_row0 = warp * 16;  // this warp's first row in the CTA
  const uint32_t q_base = smem_u32(sQ) + wg * kFp8QTileRows * D;

  for (int n = 0; n < n_end; ++n) {
    const int stage = n % Kt::kStages, n0 = n * BN;
    cp_async_wait<0>();       // tile n (and Q) landed: this thread's copies
    fence_proxy_async_smem();  // ... visible to the tensor cores
    __syncthreads();           // everyone's copies; every warpgroup is done with tile n - 1's stage
    if (n + 1 < n_end) load_keys(n + 1);
    cp_async_commit();

    float acc_s[BN / 8][4];
    const uint32_t k_base = smem_u32(sK) + stage * Kt::kTileBytes;
    const uint32_t v_base = smem_u32(sV) + stage * Kt::kTileBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk)
      wgmma_e4m3_ss_n128(acc_s, fp8_desc<kQkSwizzle>(q_base + fp8_kstep_offset<kFp8QTileRows, D>(kk)),
                         fp8_desc<kQkSwizzle>(k_base + fp8_kstep_offset<BN, D>(kk)), kk > 0);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(acc_s);

    // Scores in log2 units; masked pairs and keys past T to -inf.
    const float factor = q_factor * k_scale[n];
    const bool need_mask = n0 + BN > T || (p.causal && n0 + BN - 1 > m0);
#pragma unroll
    for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = acc_s[nb][e] * factor;
        if (need_mask) {
          const int row = m0 + warp_row0 + (lane >> 2) + 8 * (e >> 1);
          const int col = n0 + nb * 8 + 2 * (lane & 3) + (e & 1);
          if (col >= T || (p.causal && col > row)) x = -INFINITY;
        }
        acc_s[nb][e] = x;
      }

    // Online softmax (per row half: rows g and g + 8 of this warp).
    const float v_s = v_scale[n];
    const float unit_ratio = v_unit / v_s;
    v_unit = v_s;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float mx = quad_row_max(acc_s, half, row_max[half]);
      const float m_use = mx == -INFINITY ? 0.f : mx;  // a row with nothing visible yet: P = 0
      const float alpha = fast_exp2(row_max[half] - m_use);  // 0 while row_max = -inf
      row_max[half] = mx;
      const float o_factor = alpha * unit_ratio;
#pragma unroll
      for (int dj = 0; dj < D / 8; ++dj) {
        acc_o[dj][2 * half] *= o_factor;
        acc_o[dj][2 * half + 1] *= o_factor;
      }
      const float shift = m_use - kFp8PScaleLog2;  // P = 2^(x - m + 8) = 256 p
      float sum = 0.f;
#pragma unroll
      for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
        for (int e = 2 * half; e < 2 * half + 2; ++e) {
          const float pe = fast_exp2(acc_s[nb][e] - shift);
          acc_s[nb][e] = pe;
          sum += pe;
        }
      row_sum[half] = row_sum[half] * alpha + sum;
    }

    // O += P V, P packed into e4m3 A fragments (one per 32 keys).
    uint32_t pa[BN / 32][4];
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk) pack_p_fragment(pa[kk], acc_s, kk);
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) reg_fence(pa[kk][r]);
    reg_fence(acc_o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk)
      wgmma_e4m3_rs<D>(acc_o, pa[kk], fp8_desc<kVSwizzle>(v_base + fp8_kstep_offset<D, BN>(kk)), 1);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(acc_o);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warpgroup's last products are done: the K/V stages become O's staging

  // O = acc * v_unit / row sum, bf16, staged through shared memory for 16-byte stores.
  normalize_rows<D>(acc_o, row_sum, v_unit);
  uint16_t* staged = reinterpret_cast<uint16_t*>(sK);
  auto at = [&](int r, int c) { return staged + r * Kt::kOStride + c; };
  stage_rows<true, D>(acc_o, 1.f, warp_row0, at, lane);
  __syncwarp();
  uint16_t* o = p.o + b * p.o_batch_stride + h * p.o_head_stride;
  store_staged_rows<16, D>(o, p.o_row_stride, warp_row0, m0, T, at, lane);
#else
  __trap();  // built without sm_90a: the launcher refuses such devices before launching
#endif
}

}  // namespace ft::cuda::flash
