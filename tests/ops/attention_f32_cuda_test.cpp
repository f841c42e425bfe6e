// Naive attention in f32 on CUDA (mixed_precision: fp32 on a GPU) against the float64 CPU
// reference (ops/cpu/attention_reference.*, reached through the f64 CPU front end): forward, lse
// and every gradient to f32 rounding, causal and not, dropout 0 and 0.1 with the same Philox mask
// element for element, on q, k, v / dq, dk, dv slices of fused buffers as training uses them. Also:
// the GEMMs are full fp32, not TF32; flash refuses f32 on CUDA pointing at naive.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/dropout_mask.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::ops {
namespace {

using test::randn_tensor;
using test::rel_error;

struct Run {
  AttentionForward fwd;
  Tensor dqkv;  // (B, T, 3C): dq, dk, dv side by side, as the fused QKV layer's gradient
};

// Forward and backward of naive attention with q, k, v (and dq, dk, dv) strided slices of one
// (B, T, 3, H, D) buffer. `buf` is (B, T, 3C) in the dtype and on the device to run.
Run run_naive(const Tensor& buf, const Tensor& dout, int B, int T, int H, int D, const AttentionOptions& o) {
  const Tensor parts = buf.view({B, T, 3, H, D});
  const Tensor q = parts.select(2, 0), k = parts.select(2, 1), v = parts.select(2, 2);
  Run r;
  r.fwd = naive_attention_forward(q, k, v, o);
  // NaN-filled: an element the backward fails to write shows up
  r.dqkv = Tensor::full({B, T, 3 * H * D}, std::nan(""), buf.dtype(), buf.device());
  const Tensor g = r.dqkv.view({B, T, 3, H, D});
  naive_attention_backward(q, k, v, r.fwd, dout, o, g.select(2, 0), g.select(2, 1), g.select(2, 2));
  return r;
}

std::vector<double> part(const Tensor& dqkv, int which, int B, int T, int H, int D) {
  return dqkv.view({B, T, 3, H, D}).select(2, which).contiguous().to_doubles();
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::fabs(e));
  return m;
}
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::isfinite(a[i]) ? std::max(m, std::fabs(a[i] - b[i])) : INFINITY;
  return m;
}

// f32 rounding: each GEMM adds about sqrt(K) * 2^-24 relative error and __expf a few ulp, so the
// measured error sits near 1e-6; 1e-4 leaves room for cancellation in dS = P o (dP - rowsum)
// while TF32 (10-bit mantissa, ~5e-4 per product) would fail it.
constexpr double kTol = 1e-4;

void expect_f32_cuda_matches_float64(int T, bool causal, float p) {
  SCOPED_TRACE(testing::Message() << "T " << T << (causal ? " causal" : " full") << " p " << p);
  const int B = 2, H = 2, D = 64;
  // Values exact in f32, so the f64 reference sees exactly what the GPU sees.
  const Tensor buf64 = ops::cast(randn_tensor({B, T, 3 * H * D}, 71 + T, DType::F32), DType::F64);  // (B, T, 3C)
  const Tensor dout64 = ops::cast(randn_tensor({B, T, H, D}, 72 + T, DType::F32), DType::F64);    // (B, T, H, D)
  AttentionOptions o;
  o.causal = causal;
  o.dropout_p = p;
  o.philox = {2024, 7};
  const Run ref = run_naive(buf64, dout64, B, T, H, D, o);  // the float64 reference on the CPU

  const Device gpu = Device::cuda(0);
  const Run got = run_naive(ops::cast(buf64, DType::F32).to(gpu), ops::cast(dout64, DType::F32).to(gpu), B, T, H, D, o);
  ASSERT_EQ(got.fwd.out.dtype(), DType::F32);
  ASSERT_EQ(got.fwd.lse.dtype(), DType::F32);
  ASSERT_EQ(got.fwd.probs.dtype(), DType::F32);  // P kept in f32, not rounded to 16 bits
  EXPECT_LE(rel_error(got.fwd.out.to_doubles(), ref.fwd.out.to_doubles()), kTol);
  EXPECT_LE(max_abs_diff(got.fwd.lse.to_doubles(), ref.fwd.lse.to_doubles()), kTol);  // lse is O(1..5)
  const char* names[3] = {"dq", "dk", "dv"};
  for (int w = 0; w < 3; ++w) {
    const auto g = part(got.dqkv, w, B, T, H, D), r = part(ref.dqkv, w, B, T, H, D);
    EXPECT_LE(rel_error(g, r), kTol) << names[w];
    EXPECT_LE(max_abs_diff(g, r), kTol * max_abs(r)) << names[w];
  }
}

TEST(AttentionF32Cuda, NaiveMatchesFloat64ReferenceT17) {
  FT_REQUIRE_CUDA();
  for (const bool causal : {true, false})
    for (const float p : {0.f, 0.1f}) expect_f32_cuda_matches_float64(17, causal, p);
}

TEST(AttentionF32Cuda, NaiveMatchesFloat64ReferenceT128) {
  FT_REQUIRE_CUDA();
  for (const bool causal : {true, false})
    for (const float p : {0.f, 0.1f}) expect_f32_cuda_matches_float64(128, causal, p);
}

// The dropout mask element by element: with v[j] = e_j (one-hot rows, T <= D), out[i, :T] is row
// i of P o Z, so a zero there is a dropped (or causally masked) probability and nothing else. The
// zeros must sit exactly where the float64 reference's are and where core/dropout_mask.h drops.
TEST(AttentionF32Cuda, DropoutMaskIsTheReferenceMaskElementForElement) {
  FT_REQUIRE_CUDA();
  const int B = 2, T = 17, H = 3, D = 64;
  std::vector<float> host(static_cast<size_t>(B) * T * 3 * H * D);
  const std::vector<float> qk = test::randn(host.size(), 81);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int which = 0; which < 3; ++which)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) {
            const size_t i = (((static_cast<size_t>(b) * T + t) * 3 + which) * H + h) * D + d;
            host[i] = which < 2 ? qk[i] : (d == t ? 1.f : 0.f);
          }
  const Tensor buf64 = Tensor::from_floats(host, {B, T, 3 * H * D}, DType::F64);
  const Tensor parts64 = buf64.view({B, T, 3, H, D});
  const Tensor buf32 = ops::cast(buf64, DType::F32).to(Device::cuda(0));
  const Tensor parts32 = buf32.view({B, T, 3, H, D});
  for (const bool causal : {true, false}) {
    AttentionOptions o;
    o.causal = causal;
    o.dropout_p = 0.1f;
    o.philox = {31337, 5};
    const auto ref = naive_attention_forward(parts64.select(2, 0), parts64.select(2, 1), parts64.select(2, 2), o)
                         .out.to_doubles();
    const auto got = naive_attention_forward(parts32.select(2, 0), parts32.select(2, 1), parts32.select(2, 2), o)
                         .out.to_doubles();
    const DropoutParams drop = make_dropout_params(o.philox, o.dropout_p);
    int dropped = 0, kept = 0;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < T; ++i)
        for (int h = 0; h < H; ++h)
          for (int j = 0; j < T; ++j) {
            const size_t e = ((static_cast<size_t>(b) * T + i) * H + h) * D + j;
            const bool visible = !causal || j <= i;
            const bool keep = visible && dropout_keep_at(drop, static_cast<uint64_t>(b) * H + h, i, j);
            ASSERT_EQ(got[e] != 0.0, keep) << "b " << b << " h " << h << " row " << i << " col " << j;
            ASSERT_EQ(ref[e] != 0.0, keep) << "b " << b << " h " << h << " row " << i << " col " << j;
            if (visible) (keep ? kept : dropped) += 1;
          }
    EXPECT_GT(dropped, 0);  // the check saw both kinds
    EXPECT_GT(kept, 0);
    EXPECT_LE(rel_error(got, ref), kTol);
  }
}

// Full fp32, not TF32: q = 1 + 2^-13 and k = 1 everywhere give S = 64 (1 + 2^-13) = 64 + 2^-7
// exactly in fp32; TF32 rounds 1 + 2^-13 to 1 (10 mantissa bits), giving S = 64. With equal
// scores lse = S / 8 + ln(n) for n visible keys, so TF32 would show as an lse 2^-10 too small.
TEST(AttentionF32Cuda, GemmsAreFullFp32NotTf32) {
  FT_REQUIRE_CUDA();
  const int B = 1, T = 8, H = 1, D = 64;
  const Device gpu = Device::cuda(0);
  const Tensor q = Tensor::full({B, T, H, D}, 1.0 + std::ldexp(1.0, -13), DType::F32, gpu);
  const Tensor k = Tensor::full({B, T, H, D}, 1.0, DType::F32, gpu);
  const Tensor v = Tensor::full({B, T, H, D}, 1.0, DType::F32, gpu);
  AttentionOptions o;
  o.causal = true;
  const std::vector<double> lse = naive_attention_forward(q, k, v, o).lse.to_doubles();  // (1, 1, T)
  for (int i = 0; i < T; ++i)
    EXPECT_NEAR(lse[i], 8.0 + std::ldexp(1.0, -10) + std::log(static_cast<double>(i + 1)), 1e-5) << "row " << i;
}

TEST(AttentionF32Cuda, FlashRefusesF32PointingAtNaive) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const Tensor q = Tensor::zeros({1, 8, 1, 64}, DType::F32, gpu);
  std::string e;
  try {
    flash_attention_forward(q, q, q, {});
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("[flash_attention] CUDA takes bf16 or f16"), std::string::npos) << e;
  EXPECT_NE(e.find("use_flash_attention: false"), std::string::npos) << e;
}

}  // namespace
}  // namespace ft::ops
