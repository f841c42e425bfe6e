// GPU tests of the Hopper building blocks of the warp-specialised backward (flash_tma.cuh,
// flash_tma_map.h, flash_wgmma.cuh's transposed operands), each against a host computation, so a
// fault in the backward can be told apart from a fault in its parts. Skipped without an sm_90a build
// and a compute-capability-9.0 GPU.
//   - a TMA box of a strided (B, T, H, D) tensor lands in the 128-byte swizzle that sw128_offset
//     addresses, rows past T zero;
//   - bulk reduce-adds from shared memory add fp32 and int64 (two's complement, wrapping) element by
//     element into global memory;
//   - wgmma with A read transposed (M-major) and B read transposed (N-major) computes A B, checked
//     beside the plain K-major form in the same harness.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/cuda/check.h"
#include "core/half.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_tma.cuh"
#include "ops/cuda/attention/flash_tma_map.h"
#include "ops/cuda/attention/flash_wgmma.cuh"
#include "tests/ops/device_buffer.h"

namespace ft {
namespace {

using namespace ft::cuda::flash;

bool sm90a_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && ft::cuda::flash_sm90a_device();
}

#define SKIP_WITHOUT_SM90A() \
  if (!sm90a_device()) GTEST_SKIP() << "needs an sm_90a build and a compute-capability-9.0 GPU"

using testing_cuda::DeviceBuffer;

// One 64 x 64 box at (row0, head, batch) through TMA into swizzled shared memory, read back element
// by element through sw128_offset into a plain 64 x 64 output.
__global__ void tma_box_kernel(const __grid_constant__ CUtensorMap map, int row0, int head, int batch, uint16_t* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* tile = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&bar, 64 * 128);
    tma_load_4d(tile, &map, &bar, 0, row0, head, batch);
  }
  mbarrier_wait(&bar, 0, "tma test");
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x)
    out[i] = *reinterpret_cast<const uint16_t*>(tile + sw128_offset(i / 64, i % 64));
#endif
}

TEST(FlashTmaCuda, BoxLandsSwizzledWithZerosPastT) {
  SKIP_WITHOUT_SM90A();
  // A q-like view of a fused (B, T, 3, H, D) buffer: strides (T * 3HD, 3HD, D) elements.
  const int B = 2, T = 100, H = 3, D = 64;
  const int64_t row = 3 * H * D, batch = row * T;
  std::vector<uint16_t> host(static_cast<size_t>(batch) * B);
  std::mt19937 rng(5);
  for (auto& x : host) x = static_cast<uint16_t>(rng());
  DeviceBuffer<uint16_t> buf(host);
  const HeadRowsTensor t{buf.ptr, true, B, T, H, D, batch, row, D};
  ASSERT_TRUE(tma_head_rows_supported(t));
  const CUtensorMap map = make_tma_head_rows_map(t, 64);
  DeviceBuffer<uint16_t> out(64 * 64);
  const int row0 = 64, head = 2, b = 1;  // rows 64..127: 100.. are past T
  tma_box_kernel<<<1, 128, 64 * 128 + 1024>>>(map, row0, head, b, out.ptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = out.download();
  size_t bad = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      const int t_row = row0 + r;
      const uint16_t want = t_row < T ? host[b * batch + t_row * row + head * D + c] : 0;
      bad += got[r * 64 + c] != want;
    }
  EXPECT_EQ(bad, 0u) << "elements of the box that differ from the tensor (or from zero past T)";
}

__global__ void bulk_add_kernel(float* f_dst, unsigned long long* u_dst, const float* f_src,
                                const unsigned long long* u_src, int n) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(128) float sf[1024];
  __shared__ __align__(128) unsigned long long su[1024];
  for (int i = threadIdx.x; i < n; i += blockDim.x) sf[i] = f_src[i], su[i] = u_src[i];
  fence_proxy_async_smem();
  __syncthreads();
  if (threadIdx.x == 0) {
    bulk_reduce_add_f32(f_dst, sf, n * 4);
    bulk_reduce_add_u64(u_dst, su, n * 8);
    bulk_commit();
    bulk_wait<0>();
  }
#endif
}

TEST(FlashTmaCuda, BulkReduceAddsFloatsAndWrappingInt64) {
  SKIP_WITHOUT_SM90A();
  const int n = 1024;
  std::vector<float> f0(n), fs(n);
  std::vector<unsigned long long> u0(n), us(n);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  for (int i = 0; i < n; ++i) {
    f0[i] = uf(rng), fs[i] = uf(rng);
    u0[i] = rng(), us[i] = static_cast<unsigned long long>(-static_cast<long long>(rng() >> 1));  // negative adds
  }
  DeviceBuffer<float> fd(f0), fsrc(fs);
  DeviceBuffer<unsigned long long> ud(u0), usrc(us);
  for (int rep = 0; rep < 3; ++rep) bulk_add_kernel<<<1, 256>>>(fd.ptr, ud.ptr, fsrc.ptr, usrc.ptr, n);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> f = fd.download();
  const std::vector<unsigned long long> u = ud.download();
  size_t bad_f = 0, bad_u = 0;
  for (int i = 0; i < n; ++i) {
    bad_f += std::abs(f[i] - (f0[i] + 3 * fs[i])) > 1e-5f;
    bad_u += u[i] != u0[i] + 3 * us[i];  // unsigned arithmetic wraps like the int64 sum
  }
  EXPECT_EQ(bad_f, 0u) << "fp32 sums";
  EXPECT_EQ(bad_u, 0u) << "int64 sums";
}

// C (64 x 64) = A (64 x 64) B (64 x 64), bf16 in, fp32 out, one warpgroup. kTrans: A stored
// transposed (rows = the K index, 64 M elements a row) and B N-major (rows = the K index); else both
// K-major (rows = the M / N index). Both tiles 128-byte swizzled, as the kernels keep them.
template <bool kTrans>
__global__ void wgmma_product_kernel(const uint16_t* a, const uint16_t* b, float* c) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* sa = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  uint8_t* sb = sa + 64 * 128;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // a, b: row-major 64 x 64 (a[m][k], b[k][n]).
  for (int i = tid; i < 64 * 64; i += 128) {
    const int r = i / 64, col = i % 64;
    if (kTrans) {
      *reinterpret_cast<uint16_t*>(sa + sw128_offset(col, r)) = a[i];  // row k = col holds A[., k]
      *reinterpret_cast<uint16_t*>(sb + sw128_offset(r, col)) = b[i];  // row k holds B[k, .]
    } else {
      *reinterpret_cast<uint16_t*>(sa + sw128_offset(r, col)) = a[i];  // row m holds A[m, .]
      *reinterpret_cast<uint16_t*>(sb + sw128_offset(col, r)) = b[i];  // row n holds B[., n]
    }
  }
  fence_proxy_async_smem();
  __syncthreads();
  float acc[8][4];
  const uint32_t a_lo = wgmma_desc_sw128_lo(smem_u32(sa)), b_lo = wgmma_desc_sw128_lo(smem_u32(sb));
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // K-major: the k step is 32 bytes along the row; transposed: 16 rows further.
    const uint32_t step = kTrans ? 128 * kk : 2 * kk;
    wgmma_ss<64, true, kTrans, kTrans>(acc, wgmma_desc_sw128_from_lo(a_lo + step),
                                       wgmma_desc_sw128_from_lo(b_lo + step), kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  reg_fence(acc);
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 4; ++e)
      c[(16 * warp + lane / 4 + 8 * (e >> 1)) * 64 + 8 * j + 2 * (lane % 4) + (e & 1)] = acc[j][e];
#endif
}

void expect_wgmma_product(bool trans) {
  std::vector<uint16_t> a(64 * 64), b(64 * 64);
  std::vector<float> af(64 * 64), bf(64 * 64);
  std::mt19937 rng(trans ? 11 : 12);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int i = 0; i < 64 * 64; ++i) {
    a[i] = float_to_bf16(u(rng)).bits, af[i] = bf16_to_float(bf16{a[i]});
    b[i] = float_to_bf16(u(rng)).bits, bf[i] = bf16_to_float(bf16{b[i]});
  }
  DeviceBuffer<uint16_t> da(a), db(b);
  DeviceBuffer<float> dc(64 * 64);
  const int smem = 2 * 64 * 128 + 1024;
  if (trans) wgmma_product_kernel<true><<<1, 128, smem>>>(da.ptr, db.ptr, dc.ptr);
  else wgmma_product_kernel<false><<<1, 128, smem>>>(da.ptr, db.ptr, dc.ptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> c = dc.download();
  double worst = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 64; ++n) {
      double ref = 0;
      for (int k = 0; k < 64; ++k) ref += static_cast<double>(af[m * 64 + k]) * bf[k * 64 + n];
      worst = std::max(worst, std::abs(c[m * 64 + n] - ref));
    }
  EXPECT_LE(worst, 1e-4) << (trans ? "transposed A and B" : "K-major A and B") << ": largest |C - A B|";
}

TEST(FlashTmaCuda, WgmmaKMajorProductMatchesHost) {
  SKIP_WITHOUT_SM90A();
  expect_wgmma_product(false);
}

TEST(FlashTmaCuda, WgmmaTransposedOperandsProductMatchesHost) {
  SKIP_WITHOUT_SM90A();
  expect_wgmma_product(true);
}

}  // namespace
}  // namespace ft
