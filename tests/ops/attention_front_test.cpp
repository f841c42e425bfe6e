// The Tensor front-end of attention (ops/attention.h): validation messages, strided q, k, v and
// dq, dk, dv slices of fused buffers, the CPU dispatch against an independent float64 attention
// written here, and (with a GPU) CUDA against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/dropout_mask.h"
#include "ops/attention.h"
#include "ops/cpu/attention_reference.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::ops {
namespace {

using test::randn_tensor;
using test::rel_error;

struct Qkv {
  Tensor buf;      // (B, T, 3C), the fused buffer
  Tensor q, k, v;  // (B, T, H, D) strided views into buf
};

// q, k, v as the QKV linear layer lays them out: columns [q | k | v] of one (B, T, 3C) buffer.
Qkv fused_qkv(int B, int T, int H, int D, DType dtype, uint64_t seed, Device dev = Device::cpu()) {
  Qkv r;
  r.buf = randn_tensor({B, T, 3 * H * D}, seed, dtype, dev);
  const Tensor parts = r.buf.view({B, T, 3, H, D});  // (B, T, 3, H, D)
  r.q = parts.select(2, 0);
  r.k = parts.select(2, 1);
  r.v = parts.select(2, 2);
  return r;
}

using test::error_of;

// An independent float64 attention forward (no shared code with ops/cpu): for each (b, h, i),
// softmax over the allowed keys j <= i (causal) of scale * q_i . k_j, then the dropout factor of
// core/dropout_mask.h, then the weighted sum of v_j. Returns (B, T, H, D) contiguous.
std::vector<double> independent_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, float p,
                                        PhiloxState state) {
  const int B = q.size(0), T = q.size(1), H = q.size(2), D = q.size(3);
  const auto qv = q.contiguous().to_doubles(), kv = k.contiguous().to_doubles(), vv = v.contiguous().to_doubles();
  auto at = [&](int b, int t, int h, int d) { return ((static_cast<size_t>(b) * T + t) * H + h) * D + d; };
  const DropoutParams drop = make_dropout_params(state, p);
  std::vector<double> out(qv.size(), 0.0);
  // AttentionParams carries the scale as a float: 1/sqrt(D) rounded to float, even for f64 tensors.
  const double scale = 1.f / std::sqrt(static_cast<float>(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        const int n = causal ? i + 1 : T;
        std::vector<double> w(n);
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += qv[at(b, i, h, d)] * kv[at(b, j, h, d)];
          w[j] = s * scale;
          mx = std::max(mx, w[j]);
        }
        for (int j = 0; j < n; ++j) sum += (w[j] = std::exp(w[j] - mx));
        for (int j = 0; j < n; ++j) {
          const bool keep = p == 0 || dropout_keep_at(drop, static_cast<uint64_t>(b) * H + h, i, j);
          // keep_scale is the mask function's float 1 / (1 - p), shared by every kernel.
          const double pz = keep ? w[j] / sum * (p == 0 ? 1.0 : drop.keep_scale) : 0.0;
          for (int d = 0; d < D; ++d) out[at(b, i, h, d)] += pz * vv[at(b, j, h, d)];
        }
      }
  return out;
}

// ---------------------------------------------------------------- validation

TEST(AttentionFront, RejectsBadShapesAndDtypesNamingTheOp) {
  const Qkv in = fused_qkv(2, 5, 2, 4, DType::F32, 1);
  const AttentionOptions o;
  std::string e = error_of([&] { flash_attention_forward(in.buf, in.k, in.v, o); });
  EXPECT_NE(e.find("[flash_attention]"), std::string::npos) << e;
  EXPECT_NE(e.find("(B, T, H, D)"), std::string::npos) << e;
  EXPECT_NE(e.find("got (2, 5, 24)"), std::string::npos) << e;

  const Qkv other = fused_qkv(2, 6, 2, 4, DType::F32, 2);
  e = error_of([&] { flash_attention_forward(in.q, other.k, in.v, o); });
  EXPECT_NE(e.find("[flash_attention] k (2, 6, 2, 4)"), std::string::npos) << e;
  EXPECT_NE(e.find("does not match q (2, 5, 2, 4)"), std::string::npos) << e;

  const Qkv f64 = fused_qkv(2, 5, 2, 4, DType::F64, 3);
  e = error_of([&] { naive_attention_forward(in.q, in.k, f64.v, o); });
  EXPECT_NE(e.find("[naive_attention] v"), std::string::npos) << e;
  EXPECT_NE(e.find("f64"), std::string::npos) << e;

  const Tensor ints = Tensor::zeros({2, 5, 2, 4}, DType::I32);
  e = error_of([&] { flash_attention_forward(ints, ints, ints, o); });
  EXPECT_NE(e.find("f32, f64, bf16 or f16"), std::string::npos) << e;
}

TEST(AttentionFront, RejectsANonContiguousHeadDim) {
  const Qkv in = fused_qkv(1, 4, 4, 4, DType::F32, 4);
  const Tensor qt = in.q.transpose(2, 3);  // (1, 4, 4, 4) with D strided
  const std::string e = error_of([&] { flash_attention_forward(qt, in.k, in.v, {}); });
  EXPECT_NE(e.find("contiguous last dim"), std::string::npos) << e;
  EXPECT_NE(e.find("strides"), std::string::npos) << e;
}

TEST(AttentionFront, RejectsBadOptions) {
  const Qkv in = fused_qkv(1, 4, 2, 4, DType::F32, 5);
  AttentionOptions o;
  o.dropout_p = 1.5f;
  EXPECT_NE(error_of([&] { flash_attention_forward(in.q, in.k, in.v, o); }).find("dropout_p"), std::string::npos);
  o = {};
  o.softmax_scale = -1.f;
  EXPECT_NE(error_of([&] { flash_attention_forward(in.q, in.k, in.v, o); }).find("softmax_scale"), std::string::npos);
  o = {};
  o.block_size = 2;  // window_blocks 0 would hide every key
  EXPECT_NE(error_of([&] { flash_attention_forward(in.q, in.k, in.v, o); }).find("window_blocks >= 1"),
            std::string::npos);
}

TEST(AttentionFront, BackwardRejectsAWrongLseOrGradient) {
  const Qkv in = fused_qkv(1, 4, 2, 4, DType::F32, 6);
  const AttentionForward f = flash_attention_forward(in.q, in.k, in.v, {});
  const Tensor dout = randn_tensor({1, 4, 2, 4}, 7);
  const Tensor g = Tensor::empty({1, 4, 2, 4}, DType::F32);
  const Tensor bad_lse = Tensor::empty({1, 4, 2}, DType::F32);
  std::string e = error_of([&] { flash_attention_backward(in.q, in.k, in.v, f.out, bad_lse, dout, {}, g, g, g); });
  EXPECT_NE(e.find("[flash_attention_backward] lse must be"), std::string::npos) << e;
  const Tensor small = Tensor::empty({1, 3, 2, 4}, DType::F32);
  e = error_of([&] { flash_attention_backward(in.q, in.k, in.v, f.out, f.lse, dout, {}, small, g, g); });
  EXPECT_NE(e.find("dq (1, 3, 2, 4)"), std::string::npos) << e;
}

// ---------------------------------------------------------------- CPU against references

TEST(AttentionFront, CpuFloat64MatchesAnIndependentForward) {
  for (const bool flash : {true, false})
    for (const bool causal : {true, false})
      for (const float p : {0.f, 0.3f}) {
        const Qkv in = fused_qkv(2, 7, 3, 5, DType::F64, 11);
        AttentionOptions o;
        o.causal = causal;
        o.dropout_p = p;
        o.philox = {99, 4};
        const AttentionForward f = flash ? flash_attention_forward(in.q, in.k, in.v, o)
                                         : naive_attention_forward(in.q, in.k, in.v, o);
        ASSERT_EQ(f.out.shape(), Shape({2, 7, 3, 5}));
        ASSERT_EQ(f.lse.shape(), Shape({2, 3, 7}));
        EXPECT_EQ(f.out.dtype(), DType::F64);
        const auto ref = independent_forward(in.q, in.k, in.v, causal, p, o.philox);
        EXPECT_LE(rel_error(f.out.to_doubles(), ref), 1e-13) << "flash " << flash << " causal " << causal << " p " << p;
      }
}

TEST(AttentionFront, CpuFloat32MatchesFloat64ToFloatRounding) {
  const Qkv in64 = fused_qkv(2, 9, 2, 8, DType::F64, 12);
  const Tensor buf32 = ops::cast(in64.buf, DType::F32);
  const Tensor parts = buf32.view({2, 9, 3, 2, 8});
  AttentionOptions o;
  o.dropout_p = 0.2f;
  o.philox = {5, 0};
  const AttentionForward f64 = flash_attention_forward(in64.q, in64.k, in64.v, o);
  const AttentionForward f32 = flash_attention_forward(parts.select(2, 0), parts.select(2, 1), parts.select(2, 2), o);
  EXPECT_EQ(f32.out.dtype(), DType::F32);
  EXPECT_EQ(f32.lse.dtype(), DType::F32);
  EXPECT_LE(rel_error(f32.out, f64.out), 1e-6);
  EXPECT_LE(rel_error(f32.lse, f64.lse), 1e-6);
}

// The gradients land in the three slices of one dqkv buffer, every element written, and equal
// the float64 reference's on contiguous copies.
TEST(AttentionFront, CpuBackwardWritesStridedSlicesOfOneBuffer) {
  const int B = 2, T = 6, H = 2, D = 4;
  const Qkv in = fused_qkv(B, T, H, D, DType::F64, 13);
  AttentionOptions o;
  o.dropout_p = 0.25f;
  o.philox = {17, 2};
  const Tensor dout = randn_tensor({B, T, H, D}, 14, DType::F64);
  const Tensor dqkv = Tensor::full({B, T, 3 * H * D}, std::nan(""), DType::F64);  // (B, T, 3C)
  const Tensor parts = dqkv.view({B, T, 3, H, D});
  const AttentionForward f = flash_attention_forward(in.q, in.k, in.v, o);
  flash_attention_backward(in.q, in.k, in.v, f.out, f.lse, dout, o, parts.select(2, 0), parts.select(2, 1),
                           parts.select(2, 2));

  AttentionParams cfg;
  cfg.B = B, cfg.T = T, cfg.H = H, cfg.D = D;
  cfg.softmax_scale = 1.f / std::sqrt(static_cast<float>(D));
  cfg.causal = true;
  cfg.dropout = make_dropout_params(o.philox, o.dropout_p);
  const auto q = in.q.contiguous().to_doubles(), k = in.k.contiguous().to_doubles(),
             v = in.v.contiguous().to_doubles(), d = dout.to_doubles();
  std::vector<double> dq(q.size()), dk(q.size()), dv(q.size());
  cpu::attention_reference_backward(cfg, q.data(), k.data(), v.data(), d.data(), dq.data(), dk.data(), dv.data());
  EXPECT_EQ(rel_error(parts.select(2, 0).contiguous().to_doubles(), dq), 0.0);
  EXPECT_EQ(rel_error(parts.select(2, 1).contiguous().to_doubles(), dk), 0.0);
  EXPECT_EQ(rel_error(parts.select(2, 2).contiguous().to_doubles(), dv), 0.0);
  for (double x : dqkv.to_doubles()) ASSERT_TRUE(std::isfinite(x));
}

// bf16 on the CPU runs the kernels' rounding: flash (tiled) within 2x naive's error of float64.
TEST(AttentionFront, CpuBf16FlashWithinTwiceNaiveError) {
  for (const float p : {0.f, 0.1f}) {
    const int B = 2, T = 37, H = 2, D = 16;
    const Qkv in = fused_qkv(B, T, H, D, DType::BF16, 21);
    const Tensor dout = randn_tensor({B, T, H, D}, 22, DType::BF16);
    AttentionOptions o;
    o.dropout_p = p;
    o.philox = {7, 1};
    const Tensor parts64 = ops::cast(in.buf, DType::F64).view({B, T, 3, H, D});
    const Tensor q64 = parts64.select(2, 0), k64 = parts64.select(2, 1), v64 = parts64.select(2, 2);
    const Tensor dout64 = ops::cast(dout, DType::F64);

    struct Result {
      Tensor out, dq, dk, dv;
    };
    auto run = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& d, bool flash) {
      Result r;
      const AttentionForward f = flash ? flash_attention_forward(q, k, v, o) : naive_attention_forward(q, k, v, o);
      r.out = f.out;
      r.dq = Tensor::empty(q.shape(), q.dtype());
      r.dk = Tensor::empty(q.shape(), q.dtype());
      r.dv = Tensor::empty(q.shape(), q.dtype());
      if (flash) flash_attention_backward(q, k, v, f.out, f.lse, d, o, r.dq, r.dk, r.dv);
      else naive_attention_backward(q, k, v, f, d, o, r.dq, r.dk, r.dv);
      return r;
    };
    const Result ref = run(q64, k64, v64, dout64, false);
    const Result fl = run(in.q, in.k, in.v, dout, true);
    const Result nv = run(in.q, in.k, in.v, dout, false);
    EXPECT_EQ(fl.out.dtype(), DType::BF16);
    const char* names[] = {"out", "dq", "dk", "dv"};
    const Tensor* f[] = {&fl.out, &fl.dq, &fl.dk, &fl.dv};
    const Tensor* n[] = {&nv.out, &nv.dq, &nv.dk, &nv.dv};
    const Tensor* r[] = {&ref.out, &ref.dq, &ref.dk, &ref.dv};
    for (int i = 0; i < 4; ++i) {
      const double ef = rel_error(*f[i], *r[i]), en = rel_error(*n[i], *r[i]);
      EXPECT_GT(en, 0.0) << names[i];  // bf16 rounding really happened
      EXPECT_LE(ef, 2 * en + 1e-5) << names[i] << " p " << p << ": flash " << ef << " naive " << en;
    }
  }
}

TEST(AttentionFront, PhiloxOffsetsAreOnePerHeadSlice) {
  EXPECT_EQ(attention_philox_offsets(4, 12), 48u);
  // The state's offset moves the mask: (seed, offset + 1) at slice 0 is (seed, offset) at slice 1.
  const int B = 2, T = 16, H = 1, D = 4;
  const Tensor zero = Tensor::zeros({B, T, H, D}, DType::F64);  // uniform P in every batch
  const Tensor v1 = Tensor::full({B, T, H, D}, 1.0, DType::F64);
  AttentionOptions o;
  o.causal = false;
  o.dropout_p = 0.5f;
  o.philox = {3, 10};
  const auto a = flash_attention_forward(zero, zero, v1, o).out.to_doubles();
  o.philox = {3, 11};
  const auto b = flash_attention_forward(zero, zero, v1, o).out.to_doubles();
  const size_t half = a.size() / 2;  // batch 1 of the first call is batch 0 of the second
  for (size_t i = 0; i < half; ++i) EXPECT_DOUBLE_EQ(a[half + i], b[i]) << i;
}

// ---------------------------------------------------------------- CUDA against the CPU

void expect_cuda_matches_cpu(bool flash, float p, int T, int D = 64) {
  const int B = 2, H = 3;
  const Qkv cpu_in = fused_qkv(B, T, H, D, DType::BF16, 41);
  const Tensor dout_cpu = randn_tensor({B, T, H, D}, 42, DType::BF16);
  const Device gpu = Device::cuda(0);
  const Tensor parts = cpu_in.buf.to(gpu).view({B, T, 3, H, D});
  const Tensor q = parts.select(2, 0), k = parts.select(2, 1), v = parts.select(2, 2);
  AttentionOptions o;
  o.dropout_p = p;
  o.philox = {1234, 56};
  auto grads = [&](const Tensor& qq, const Tensor& kk, const Tensor& vv, const Tensor& d, bool use_flash,
                   Device dev) {
    const AttentionForward f = use_flash ? flash_attention_forward(qq, kk, vv, o) : naive_attention_forward(qq, kk, vv, o);
    const Tensor dqkv = Tensor::empty({B, T, 3 * H * D}, DType::BF16, dev);
    const Tensor g = dqkv.view({B, T, 3, H, D});
    if (use_flash) flash_attention_backward(qq, kk, vv, f.out, f.lse, d, o, g.select(2, 0), g.select(2, 1), g.select(2, 2));
    else naive_attention_backward(qq, kk, vv, f, d, o, g.select(2, 0), g.select(2, 1), g.select(2, 2));
    return std::make_pair(f, dqkv);
  };
  const auto [fc, gc] = grads(cpu_in.q, cpu_in.k, cpu_in.v, dout_cpu, flash, Device::cpu());
  const auto [fg, gg] = grads(q, k, v, dout_cpu.to(gpu), flash, gpu);
  // Same rounding points, different summation order: bf16-level agreement.
  EXPECT_LE(rel_error(fg.out, fc.out), 1e-2) << "flash " << flash << " p " << p << " T " << T << " D " << D;
  EXPECT_LE(test::max_abs_diff(fg.lse, fc.lse), 1e-3);
  EXPECT_LE(rel_error(gg, gc), 2e-2);
}

TEST(AttentionFrontCuda, FlashMatchesCpuOnStridedQkv) {
  FT_REQUIRE_CUDA();
  for (const int T : {1, 77, 256})
    for (const float p : {0.f, 0.1f}) expect_cuda_matches_cpu(true, p, T);
}

TEST(AttentionFrontCuda, FlashHeadDim256MatchesCpuOnStridedQkv) {
  FT_REQUIRE_CUDA();
  for (const int T : {77, 256})
    for (const float p : {0.f, 0.1f}) expect_cuda_matches_cpu(true, p, T, 256);
}

TEST(AttentionFrontCuda, NaiveMatchesCpuOnStridedQkv) {
  FT_REQUIRE_CUDA();
  for (const int T : {1, 77, 256})
    for (const float p : {0.f, 0.1f}) expect_cuda_matches_cpu(false, p, T);
}

TEST(AttentionFrontCuda, RejectsWhatTheKernelsCannotTake) {
  FT_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  const Qkv d32 = fused_qkv(1, 8, 2, 32, DType::BF16, 51, gpu);
  std::string e = error_of([&] { flash_attention_forward(d32.q, d32.k, d32.v, {}); });
  EXPECT_NE(e.find("head dim D = 32: the CUDA flash kernels take 64, 128 and 256 (naive attention takes any)"),
            std::string::npos)
      << e;

  const Qkv f32 = fused_qkv(1, 8, 1, 64, DType::F32, 52, gpu);
  e = error_of([&] { flash_attention_forward(f32.q, f32.k, f32.v, {}); });
  EXPECT_NE(e.find("CUDA takes bf16 or f16"), std::string::npos) << e;

  // A row stride of 3 * 64 + 4 elements: not a multiple of 8.
  const Tensor odd = Tensor::zeros({1, 8, 3 * 64 + 4}, DType::BF16, gpu);
  const Tensor q = odd.slice(2, 0, 64).view({1, 8, 1, 64});
  e = error_of([&] { flash_attention_forward(q, q, q, {}); });
  EXPECT_NE(e.find("multiples of 8"), std::string::npos) << e;

  // Starting 4 elements (8 bytes) into the buffer: not 16-byte aligned.
  const Tensor wide = Tensor::zeros({1, 8, 3 * 64 + 8}, DType::BF16, gpu);
  const Tensor shifted = wide.slice(2, 4, 68).view({1, 8, 1, 64});
  e = error_of([&] { flash_attention_forward(shifted, shifted, shifted, {}); });
  EXPECT_NE(e.find("16-byte boundary"), std::string::npos) << e;
}

}  // namespace
}  // namespace ft::ops
