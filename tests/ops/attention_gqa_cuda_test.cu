// Grouped-query and multi-query attention on the GPU (skipped without one), through the ops front
// door on q, k, v / dq, dk, dv slices of one fused (B, T, (H + 2 H_kv) D) buffer as the model lays
// them out: flash and naive against the float64 CPU reference (flash within twice naive's error)
// on every flash kernel path (mma.sync and wgmma forwards, both wgmma forward tiles, 4-warp, wide
// and warp-specialised backwards, both deterministic backwards), D = 64 and 128, H_kv = 2 and 1
// (multi-query); flash on grouped K/V equals flash on K/V heads repeated per group bit for bit (out,
// dq, and dk, dv as the fp32 group sum of the repeated heads' gradients, dropout included), and dk,
// dv are bit-reproducible.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/elementwise.h"
#include "tests/ops/attention_gqa_test_util.h"
#include "tests/test_util.h"

namespace ft::ops {
namespace {

using test::rel_error;

// Equal values element for element (NaN equals nothing, so an unwritten NaN fails).
bool same_values(const Tensor& a, const Tensor& b) { return a.to_doubles() == b.to_doubles(); }

// q, k, v as strided views of one fused (B, T, (H + 2 H_kv) D) buffer: columns [q | k | v].
struct FusedQkv {
  Tensor buf;
  Tensor q, k, v;
};
FusedQkv fused_views(const Tensor& buf, int H, int H_kv, int D) {
  const int64_t B = buf.size(0), T = buf.size(1);
  return {buf, buf.slice(2, 0, H * D).view({B, T, H, D}), buf.slice(2, H * D, (H + H_kv) * D).view({B, T, H_kv, D}),
          buf.slice(2, (H + H_kv) * D, (H + 2 * H_kv) * D).view({B, T, H_kv, D})};
}
// The fused buffer of CPU inputs, built on the CPU and moved to `dev` whole.
FusedQkv fused_qkv(const GqaInputs& in, int H, int H_kv, int D, Device dev) {
  const int64_t B = in.q.size(0), T = in.q.size(1);
  FusedQkv host = fused_views(Tensor::empty({B, T, (H + 2 * H_kv) * D}, in.q.dtype()), H, H_kv, D);
  host.q.copy_(in.q);
  host.k.copy_(in.k);
  host.v.copy_(in.v);
  return fused_views(host.buf.to(dev), H, H_kv, D);
}

// Forward and backward with the gradients written into one fused dqkv buffer.
struct FusedGrads {
  AttentionForward fwd;
  Tensor dqkv;
  FusedQkv d;
};
FusedGrads run_fused(bool flash, const FusedQkv& in, const Tensor& dout, int H, int H_kv, int D,
                     const AttentionOptions& o) {
  FusedGrads g;
  g.fwd = flash ? flash_attention_forward(in.q, in.k, in.v, o) : naive_attention_forward(in.q, in.k, in.v, o);
  g.dqkv = Tensor::full(in.buf.shape(), std::nan(""), in.buf.dtype(), in.buf.device());  // unwritten -> NaN
  g.d = fused_views(g.dqkv, H, H_kv, D);
  if (flash) flash_attention_backward(in.q, in.k, in.v, g.fwd.out, g.fwd.lse, dout, o, g.d.q, g.d.k, g.d.v);
  else naive_attention_backward(in.q, in.k, in.v, g.fwd, dout, o, g.d.q, g.d.k, g.d.v);
  return g;
}

// The flash kernel paths a case can take; the setters are process-wide, restored by the guard.
enum class FlashPath { kDefault, kNoWgmma, kLargeWgmmaTile, kWideBackward, kDeterministic, kWsBackward };
struct PathGuard {
  explicit PathGuard(FlashPath path) {
    if (path == FlashPath::kNoWgmma) cuda::set_flash_wgmma_allowed(false);
    if (path == FlashPath::kLargeWgmmaTile) cuda::set_flash_fwd_small_tile_max_t(0);
    if (path == FlashPath::kWideBackward) cuda::set_flash_bwd_wide_min_t(1);
    if (path == FlashPath::kWideBackward) cuda::set_flash_bwd_ws_min_t(INT_MAX);  // it would go first
    if (path == FlashPath::kWsBackward) cuda::set_flash_bwd_ws_min_t(0);
  }
  ~PathGuard() {
    cuda::set_flash_wgmma_allowed(true);
    cuda::set_flash_fwd_small_tile_max_t(-1);
    cuda::set_flash_bwd_wide_min_t(-1);
    cuda::set_flash_bwd_ws_min_t(-1);
  }
};
const char* path_name(FlashPath p) {
  switch (p) {
    case FlashPath::kDefault: return "default";
    case FlashPath::kNoWgmma: return "mma.sync forward";
    case FlashPath::kLargeWgmmaTile: return "two-warpgroup wgmma forward";
    case FlashPath::kWideBackward: return "wide backward";
    case FlashPath::kDeterministic: return "deterministic";
    case FlashPath::kWsBackward: return "warp-specialised backward";
  }
  return "?";
}

void expect_flash_within_twice_naive(int D, int H_kv, int T, float p, FlashPath path) {
  const int B = 2, H = 4;
  const Device gpu = Device::cuda(0);
  const GqaInputs in = gqa_inputs(B, T, H, H_kv, D, DType::BF16, Device::cpu(), 100 + T + D);
  AttentionOptions o;
  o.dropout_p = p;
  o.philox = {1234, 56};
  o.deterministic = path == FlashPath::kDeterministic;
  auto f64 = [](const Tensor& t) { return cast(t, DType::F64); };
  const Grads ref = run_attention(false, f64(in.q), f64(in.k), f64(in.v), f64(in.dout), o);
  const FusedQkv dev = fused_qkv(in, H, H_kv, D, gpu);
  const Tensor dout = in.dout.to(gpu);
  const PathGuard guard(path);
  const FusedGrads fl = run_fused(true, dev, dout, H, H_kv, D, o);
  const FusedGrads nv = run_fused(false, dev, dout, H, H_kv, D, o);
  const std::string name = std::string(path_name(path)) + " D " + std::to_string(D) + " H_kv " +
                           std::to_string(H_kv) + " T " + std::to_string(T) + " p " + std::to_string(p);
  const char* names[] = {"out", "dq", "dk", "dv"};
  const Tensor f[] = {fl.fwd.out, fl.d.q, fl.d.k, fl.d.v};
  const Tensor n[] = {nv.fwd.out, nv.d.q, nv.d.k, nv.d.v};
  const Tensor* r[] = {&ref.fwd.out, &ref.dq, &ref.dk, &ref.dv};
  for (int i = 0; i < 4; ++i) {
    const double ef = rel_error(f[i].to(Device::cpu()), *r[i]), en = rel_error(n[i].to(Device::cpu()), *r[i]);
    EXPECT_LE(en, 2e-2) << name << " " << names[i] << ": naive " << en;
    EXPECT_LE(ef, 2 * en + 1e-5) << name << " " << names[i] << ": flash " << ef << " naive " << en;
  }
  EXPECT_LE(rel_error(fl.fwd.lse.to(Device::cpu()), ref.fwd.lse), 1e-5) << name;
}

TEST(AttentionGqaCuda, FlashAndNaiveMatchFloat64ReferenceOnEveryPath) {
  FT_REQUIRE_CUDA();
  for (const int D : {64, 128})
    for (const int H_kv : {2, 1})
      for (const int T : {77, 256})
        for (const float p : {0.f, 0.1f})
          for (const FlashPath path : {FlashPath::kDefault, FlashPath::kNoWgmma, FlashPath::kLargeWgmmaTile,
                                       FlashPath::kWideBackward, FlashPath::kDeterministic, FlashPath::kWsBackward}) {
            if (D == 128 && path == FlashPath::kWideBackward) continue;  // D = 64 only
            expect_flash_within_twice_naive(D, H_kv, T, p, path);
          }
}

// The same kernels on K/V heads repeated per group: out and dq bit for bit (the deterministic
// backward fixes dq's order), dk and dv the repeated heads' bf16 gradients summed in fp32 in head
// order and rounded once -- dropout included, whose mask stays keyed on the query head.
TEST(AttentionGqaCuda, FlashEqualsMultiHeadOnRepeatedKvHeadsBitForBit) {
  FT_REQUIRE_CUDA();
  const int B = 2, T = 130, H = 4, D = 64;
  const Device gpu = Device::cuda(0);
  for (const int H_kv : {2, 1})
    for (const float p : {0.f, 0.1f}) {
      const GqaInputs in = gqa_inputs(B, T, H, H_kv, D, DType::BF16, gpu, 7);
      AttentionOptions o;
      o.dropout_p = p;
      o.philox = {77, 3};
      o.deterministic = true;
      const Grads gqa = run_attention(true, in.q, in.k, in.v, in.dout, o);
      const Grads mha = run_attention(true, in.q, repeat_kv_heads(in.k, H), repeat_kv_heads(in.v, H), in.dout, o);
      const std::string name = "H_kv " + std::to_string(H_kv) + " p " + std::to_string(p);
      EXPECT_TRUE(same_values(gqa.fwd.out, mha.fwd.out)) << name;
      EXPECT_TRUE(same_values(gqa.fwd.lse, mha.fwd.lse)) << name;
      EXPECT_TRUE(same_values(gqa.dq, mha.dq)) << name;
      for (const auto& [got, full] : {std::make_pair(gqa.dk, mha.dk), std::make_pair(gqa.dv, mha.dv)}) {
        const std::vector<double> sums = sum_head_groups<float>(full, H_kv);
        const Tensor expect = Tensor::from_floats(std::vector<float>(sums.begin(), sums.end()),
                                                  {B, T, H_kv, D}, DType::BF16);  // rounded once
        EXPECT_TRUE(same_values(got, expect)) << name;
      }
    }
}

TEST(AttentionGqaCuda, KvGradientsAreBitReproducible) {
  FT_REQUIRE_CUDA();
  const int B = 2, T = 200, H = 8, H_kv = 2, D = 64;
  const GqaInputs in = gqa_inputs(B, T, H, H_kv, D, DType::BF16, Device::cuda(0), 9);
  AttentionOptions o;
  o.dropout_p = 0.1f;
  o.philox = {5, 0};
  for (const bool flash : {true, false}) {
    const Grads a = run_attention(flash, in.q, in.k, in.v, in.dout, o);
    const Grads b = run_attention(flash, in.q, in.k, in.v, in.dout, o);
    EXPECT_TRUE(same_values(a.dk, b.dk)) << "flash " << flash;
    EXPECT_TRUE(same_values(a.dv, b.dv)) << "flash " << flash;
  }
}

}  // namespace
}  // namespace ft::ops
