// Peak device memory of attention forward+backward, read from the caching allocator (per
// process, so parallel test processes cannot disturb it): linear in T for flash but for the
// dropout keep bits it stores for its backward (one bit a visible pair, capped), quadratic for
// naive, which materialises the (B, H, T, T) scores.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "ops/attention.h"
#include "tests/test_util.h"

namespace ft {
namespace {

// Bytes the allocator's peak rises by over one forward + backward of causal attention with
// dropout, beyond the inputs and gradients, which exist before the peak is reset.
double extra_peak_bytes(bool flash, int64_t B, int64_t T, int64_t* keep_mask_bytes = nullptr) {
  const int64_t H = 12, D = 64;
  const Device gpu = Device::cuda();
  const Tensor qkv = test::randn_tensor({B, T, 3 * H * D}, 7, DType::BF16, gpu);  // (B, T, 3C)
  auto part = [&](const Tensor& t, int i) { return t.slice(2, i * H * D, (i + 1) * H * D).view({B, T, H, D}); };
  const Tensor dout = test::randn_tensor({B, T, H, D}, 8, DType::BF16, gpu);
  const Tensor dqkv = Tensor::empty({B, T, 3 * H * D}, DType::BF16, gpu);
  ops::AttentionOptions o;
  o.dropout_p = 0.1f;
  o.philox = PhiloxState{3, 0};
  synchronize(gpu);
  Allocator& alloc = cuda_allocator(0);
  alloc.reset_peak();
  const size_t base = alloc.stats().allocated_bytes;
  {
    if (flash) {
      const ops::AttentionForward f = ops::flash_attention_forward(part(qkv, 0), part(qkv, 1), part(qkv, 2), o);
      ops::flash_attention_backward(part(qkv, 0), part(qkv, 1), part(qkv, 2), f.out, f.lse, dout, o, part(dqkv, 0),
                                    part(dqkv, 1), part(dqkv, 2), f.keep_mask);
      // The one T x T piece, by design: the dropout keep bits stored for the backward, one bit a
      // visible (query, key), capped (ops/cuda/attention/flash_keep_mask.h)
      if (keep_mask_bytes != nullptr) *keep_mask_bytes = f.keep_mask.defined() ? f.keep_mask.numel() : 0;
    } else {
      const ops::AttentionForward f = ops::naive_attention_forward(part(qkv, 0), part(qkv, 1), part(qkv, 2), o);
      ops::naive_attention_backward(part(qkv, 0), part(qkv, 1), part(qkv, 2), f, dout, o, part(dqkv, 0),
                                    part(dqkv, 1), part(dqkv, 2));
    }
    synchronize(gpu);
  }
  return static_cast<double>(alloc.stats().peak_allocated_bytes - base);
}

TEST(AttentionMemoryCuda, FlashPeakGrowsLinearlyInT) {
  FT_REQUIRE_CUDA();
  // B = 4 keeps every buffer a whole number of the allocator's 2 MiB rounding units, so the
  // rounding does not blur the ratio (at B = 1, T = 1k the 1.5 MiB output rounds up to 2 MiB).
  // Without the dropout keep bits (B H T^2 / 16 bytes causal, where stored: their own test below).
  int64_t m1 = 0, m4 = 0, m16 = 0;
  const double p1 = extra_peak_bytes(true, 4, 1024, &m1) - m1, p4 = extra_peak_bytes(true, 4, 4096, &m4) - m4,
               p16 = extra_peak_bytes(true, 4, 16384, &m16) - m16;
  std::printf("flash fwd+bwd extra peak less the keep bits: T=1k %.1f MiB, 4k %.1f MiB, 16k %.1f MiB (keep bits "
              "%.1f, %.1f, %.1f MiB)\n", p1 / 1048576, p4 / 1048576, p16 / 1048576, m1 / 1048576., m4 / 1048576.,
              m16 / 1048576.);
  // Linear: quadrupling T quadruples the peak (allocator rounding and fixed-size pieces aside).
  EXPECT_NEAR(p4 / p1, 4.0, 0.4);
  EXPECT_NEAR(p16 / p4, 4.0, 0.4);
  // Nothing T x T: at T = 16k one bf16 score matrix per head would be 4 * 12 * 16384^2 * 2 = 24 GiB.
  EXPECT_LT(p16, 4 * 8.0 * 16384 * 12 * 64 * 4);  // a few (B, T, H, D) fp32 buffers at most
}

// The keep bits, where stored, are one bit per visible (query, key) in 64 x 128 blocks: causal
// B H (T / 64) (T / 64 + 2) / 4 KiB (for T a multiple of 128), 774 MiB at B = 4, H = 12, T = 16k.
TEST(AttentionMemoryCuda, FlashKeepBitsAreOneBitAVisiblePair) {
  FT_REQUIRE_CUDA();
  for (int64_t T : {1024, 4096, 16384}) {
    int64_t bytes = 0;
    extra_peak_bytes(true, 4, T, &bytes);
    if (bytes == 0) GTEST_SKIP() << "no keep bits stored here (no warp-specialised backward: sm_90a build and GPU)";
    const int64_t a = T / 128;  // rows of 64-query blocks: 2a; causal blocks a (a + 1)
    EXPECT_EQ(bytes, 4 * 12 * a * (a + 1) * 1024) << "T = " << T;
  }
}

TEST(AttentionMemoryCuda, NaivePeakGrowsQuadraticallyInT) {
  FT_REQUIRE_CUDA();
  const double p1 = extra_peak_bytes(false, 1, 1024), p4 = extra_peak_bytes(false, 1, 4096);
  std::printf("naive fwd+bwd extra peak: T=1k %.1f MiB, 4k %.1f MiB\n", p1 / 1048576, p4 / 1048576);
  EXPECT_GT(p4 / p1, 12.0);  // ~16x: the (B, H, T, T) matrices dominate
}

}  // namespace
}  // namespace ft
