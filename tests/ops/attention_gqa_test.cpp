// Grouped-query and multi-query attention on the CPU (no GPU): k, v with H_kv heads shared by
// H / H_kv query heads each. The float64 reference equals multi-head attention on K/V heads
// repeated per group (dk, dv then being the group sums of the repeated heads' gradients), with and
// without dropout (whose mask stays keyed on the query head), and matches finite differences; the
// bf16 tiled flash algorithm stays within twice the error of bf16 naive attention; the front door
// rejects head counts that do not divide and k, v, dk, dv of the wrong shape.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ops/attention.h"
#include "ops/cpu/attention_reference.h"
#include "ops/elementwise.h"
#include "tests/ops/attention_gqa_test_util.h"
#include "tests/test_util.h"

namespace ft::ops {
namespace {

using test::error_of;
using test::randn_tensor;
using test::rel_error;

TEST(AttentionGqa, Float64EqualsMultiHeadOnRepeatedKvHeads) {
  const int B = 2, T = 13, H = 4, D = 8;
  for (const int H_kv : {2, 1})
    for (const bool causal : {true, false})
      for (const float p : {0.f, 0.3f}) {
        const GqaInputs in = gqa_inputs(B, T, H, H_kv, D, DType::F64, Device::cpu(), 1);
        const Tensor &q = in.q, &k = in.k, &v = in.v, &dout = in.dout;
        AttentionOptions o;
        o.causal = causal;
        o.dropout_p = p;
        o.philox = {99, 5};
        const std::string name = "H_kv " + std::to_string(H_kv) + " causal " + std::to_string(causal) + " p " +
                                 std::to_string(p);
        const Grads mha = run_attention(true, q, repeat_kv_heads(k, H), repeat_kv_heads(v, H), dout, o);
        for (const bool flash : {true, false}) {
          const Grads gqa = run_attention(flash, q, k, v, dout, o);
          EXPECT_LE(rel_error(gqa.fwd.out, mha.fwd.out), 1e-14) << name;
          EXPECT_LE(rel_error(gqa.fwd.lse, mha.fwd.lse), 1e-14) << name;
          EXPECT_LE(rel_error(gqa.dq, mha.dq), 1e-14) << name;
          EXPECT_LE(rel_error(gqa.dk.to_doubles(), sum_head_groups(mha.dk, H_kv)), 1e-14) << name;
          EXPECT_LE(rel_error(gqa.dv.to_doubles(), sum_head_groups(mha.dv, H_kv)), 1e-14) << name;
        }
      }
}

TEST(AttentionGqa, Float64ReferenceBackwardMatchesFiniteDifferences) {
  const int B = 1, T = 6, H = 4, H_kv = 2, D = 3;
  for (const float p : {0.f, 0.3f}) {
    AttentionParams cfg;
    cfg.B = B, cfg.T = T, cfg.H = H, cfg.H_kv = H_kv, cfg.D = D;
    cfg.softmax_scale = 0.7f;
    cfg.causal = true;
    cfg.dropout = make_dropout_params(PhiloxState{3, 1}, p);
    const size_t nq = static_cast<size_t>(B) * T * H * D, nkv = static_cast<size_t>(B) * T * H_kv * D;
    const std::vector<double> q = randn_tensor({int64_t(nq)}, 11, DType::F64).to_doubles();
    const std::vector<double> k = randn_tensor({int64_t(nkv)}, 12, DType::F64).to_doubles();
    const std::vector<double> v = randn_tensor({int64_t(nkv)}, 13, DType::F64).to_doubles();
    const std::vector<double> w = randn_tensor({int64_t(nq)}, 14, DType::F64).to_doubles();  // loss = sum(w * o)
    std::vector<double> dq(nq), dk(nkv), dv(nkv), o(nq), lse(static_cast<size_t>(B) * H * T);
    cpu::attention_reference_backward(cfg, q.data(), k.data(), v.data(), w.data(), dq.data(), dk.data(), dv.data());
    auto loss = [&](const std::vector<double>* x) {
      cpu::attention_reference_forward(cfg, x[0].data(), x[1].data(), x[2].data(), o.data(), lse.data());
      double s = 0;
      for (size_t i = 0; i < nq; ++i) s += w[i] * o[i];
      return s;
    };
    const std::vector<double>* grads[] = {&dq, &dk, &dv};
    for (int which = 0; which < 3; ++which)
      for (size_t i = 0; i < grads[which]->size(); ++i) {
        std::vector<double> a[3] = {q, k, v}, b[3] = {q, k, v};
        const double h = 1e-6;
        a[which][i] += h;
        b[which][i] -= h;
        const double fd = (loss(a) - loss(b)) / (2 * h);
        EXPECT_NEAR(fd, (*grads[which])[i], 1e-6) << "input " << which << " element " << i << " p " << p;
      }
  }
}

// bf16 on the CPU runs the kernels' rounding (per-query-head dK, dV rounded, then the group sum).
TEST(AttentionGqa, CpuBf16FlashWithinTwiceNaiveError) {
  const int B = 2, T = 37, H = 4, D = 16;
  for (const int H_kv : {2, 1})
    for (const float p : {0.f, 0.1f}) {
      const GqaInputs in = gqa_inputs(B, T, H, H_kv, D, DType::BF16, Device::cpu(), 21);
      const Tensor &q = in.q, &k = in.k, &v = in.v, &dout = in.dout;
      AttentionOptions o;
      o.dropout_p = p;
      o.philox = {7, 1};
      auto f64 = [](const Tensor& t) { return cast(t, DType::F64); };
      const Grads ref = run_attention(false, f64(q), f64(k), f64(v), f64(dout), o);
      const Grads fl = run_attention(true, q, k, v, dout, o);
      const Grads nv = run_attention(false, q, k, v, dout, o);
      const char* names[] = {"out", "dq", "dk", "dv"};
      const Tensor* f[] = {&fl.fwd.out, &fl.dq, &fl.dk, &fl.dv};
      const Tensor* n[] = {&nv.fwd.out, &nv.dq, &nv.dk, &nv.dv};
      const Tensor* r[] = {&ref.fwd.out, &ref.dq, &ref.dk, &ref.dv};
      for (int i = 0; i < 4; ++i) {
        const double ef = rel_error(*f[i], *r[i]), en = rel_error(*n[i], *r[i]);
        EXPECT_GT(en, 0.0) << names[i];  // bf16 rounding really happened
        EXPECT_LE(ef, 2 * en + 1e-5) << names[i] << " H_kv " << H_kv << " p " << p << ": flash " << ef
                                     << " naive " << en;
      }
    }
}

// H_kv = H given explicitly is multi-head attention: the same bits as leaving H_kv at 0 (the
// kernels' and references' default), dropout mask included.
TEST(AttentionGqa, EqualHeadCountsAreMultiHeadAttentionBitForBit) {
  const int B = 1, T = 9, H = 3, D = 4;
  AttentionParams cfg;
  cfg.B = B, cfg.T = T, cfg.H = H, cfg.D = D;
  cfg.softmax_scale = 0.5f;
  cfg.causal = true;
  cfg.dropout = make_dropout_params(PhiloxState{8, 2}, 0.3f);
  const size_t n = static_cast<size_t>(B) * T * H * D;
  const std::vector<double> q = randn_tensor({int64_t(n)}, 31, DType::F64).to_doubles();
  const std::vector<double> k = randn_tensor({int64_t(n)}, 32, DType::F64).to_doubles();
  const std::vector<double> v = randn_tensor({int64_t(n)}, 33, DType::F64).to_doubles();
  std::vector<double> o0(n), o1(n), lse(static_cast<size_t>(B) * H * T), dq0(n), dk0(n), dv0(n), dq1(n), dk1(n),
      dv1(n);
  cpu::attention_reference_forward(cfg, q.data(), k.data(), v.data(), o0.data(), lse.data());
  cpu::attention_reference_backward(cfg, q.data(), k.data(), v.data(), o0.data(), dq0.data(), dk0.data(), dv0.data());
  cfg.H_kv = H;
  cpu::attention_reference_forward(cfg, q.data(), k.data(), v.data(), o1.data(), lse.data());
  cpu::attention_reference_backward(cfg, q.data(), k.data(), v.data(), o0.data(), dq1.data(), dk1.data(), dv1.data());
  EXPECT_EQ(o0, o1);
  EXPECT_EQ(dq0, dq1);
  EXPECT_EQ(dk0, dk1);
  EXPECT_EQ(dv0, dv1);
}

TEST(AttentionGqa, RejectsHeadCountsThatDoNotDivideAndWrongKvShapes) {
  const int B = 1, T = 4, H = 4, D = 8;
  const Tensor q = randn_tensor({B, T, H, D}, 41);
  const Tensor k3 = randn_tensor({B, T, 3, D}, 42);
  std::string e = error_of([&] { flash_attention_forward(q, k3, k3, {}); });
  EXPECT_NE(e.find("[flash_attention] n_heads (q) must be a multiple of n_kv_heads (k, v)"), std::string::npos) << e;

  const Tensor k2 = randn_tensor({B, T, 2, D}, 43), v1 = randn_tensor({B, T, 1, D}, 44);
  e = error_of([&] { naive_attention_forward(q, k2, v1, {}); });
  EXPECT_NE(e.find("[naive_attention] v (1, 4, 1, 8)"), std::string::npos) << e;
  EXPECT_NE(e.find("expected shape (1, 4, 2, 8)"), std::string::npos) << e;

  const Tensor k_short = randn_tensor({B, T - 1, 2, D}, 45);
  e = error_of([&] { flash_attention_forward(q, k_short, k_short, {}); });
  EXPECT_NE(e.find("[flash_attention] k (1, 3, 2, 8)"), std::string::npos) << e;

  const AttentionForward f = flash_attention_forward(q, k2, k2, {});
  const Tensor dout = randn_tensor({B, T, H, D}, 46);
  const Tensor dq = Tensor::empty(q.shape(), DType::F32), dkv = Tensor::empty(k2.shape(), DType::F32);
  const Tensor dk_wide = Tensor::empty(q.shape(), DType::F32);  // (B, T, H, D): the per-query-head shape
  e = error_of([&] { flash_attention_backward(q, k2, k2, f.out, f.lse, dout, {}, dq, dk_wide, dkv); });
  EXPECT_NE(e.find("[flash_attention_backward] dk (1, 4, 4, 8)"), std::string::npos) << e;
  EXPECT_NE(e.find("expected shape (1, 4, 2, 8)"), std::string::npos) << e;
  EXPECT_NO_THROW(flash_attention_backward(q, k2, k2, f.out, f.lse, dout, {}, dq, dkv, dkv.clone()));
}

}  // namespace
}  // namespace ft::ops
