// Peak device memory of attention forward+backward, read from the caching allocator (per
// process, so parallel test processes cannot disturb it): linear in T for flash, quadratic for
// naive, which materialises the (B, H, T, T) scores.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "ops/attention.h"
#include "tests/test_util.h"

namespace ft {
namespace {

// Bytes the allocator's peak rises by over one forward + backward of causal attention with
// dropout, beyond the inputs and gradients, which exist before the peak is reset.
double extra_peak_bytes(bool flash, int64_t B, int64_t T) {
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
                                    part(dqkv, 1), part(dqkv, 2));
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
  const double p1 = extra_peak_bytes(true, 4, 1024), p4 = extra_peak_bytes(true, 4, 4096),
               p16 = extra_peak_bytes(true, 4, 16384);
  std::printf("flash fwd+bwd extra peak: T=1k %.1f MiB, 4k %.1f MiB, 16k %.1f MiB\n", p1 / 1048576, p4 / 1048576,
              p16 / 1048576);
  // Linear: quadrupling T quadruples the peak (allocator rounding and fixed-size pieces aside).
  EXPECT_NEAR(p4 / p1, 4.0, 0.4);
  EXPECT_NEAR(p16 / p4, 4.0, 0.4);
  // Nothing T x T: at T = 16k one bf16 score matrix per head would be 4 * 12 * 16384^2 * 2 = 24 GiB.
  EXPECT_LT(p16, 4 * 8.0 * 16384 * 12 * 64 * 4);  // a few (B, T, H, D) fp32 buffers at most
}

TEST(AttentionMemoryCuda, NaivePeakGrowsQuadraticallyInT) {
  FT_REQUIRE_CUDA();
  const double p1 = extra_peak_bytes(false, 1, 1024), p4 = extra_peak_bytes(false, 1, 4096);
  std::printf("naive fwd+bwd extra peak: T=1k %.1f MiB, 4k %.1f MiB\n", p1 / 1048576, p4 / 1048576);
  EXPECT_GT(p4 / p1, 12.0);  // ~16x: the (B, H, T, T) matrices dominate
}

}  // namespace
}  // namespace ft
