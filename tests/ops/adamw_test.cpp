#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/adamw.h"
#include "ops/grad_norm.h"
#include "tests/test_util.h"

namespace ft {
namespace {

using test::expect_error;

using test::randn;

// Independent reference in double, written from PyTorch's AdamW documentation.
struct RefAdamW {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g0, const ops::AdamWOptions& o, double grad_factor) {
    const double bc1 = 1 - std::pow(double(o.beta1), double(o.step));
    const double bc2 = 1 - std::pow(double(o.beta2), double(o.step));
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = g0[i] * grad_factor;
      p[i] *= 1 - double(o.lr) * o.weight_decay;
      m[i] = o.beta1 * m[i] + (1 - double(o.beta1)) * g;
      v[i] = o.beta2 * v[i] + (1 - double(o.beta2)) * g * g;
      p[i] -= double(o.lr) / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
    }
  }
};

std::vector<double> to_d(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Relative error with a floor: m = beta1 m + (1 - beta1) g can cancel to near zero, and then its
// rounding error is relative to the terms (gradients here are ~3, so the terms are ~0.3), not to
// the tiny result; the CUDA kernel's fused multiply-adds round such values differently
// (measured on an H200: 1.3e-5 with a 1e-3 floor).
double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::fabs(a[i] - b[i]) / (std::fabs(b[i]) + 1e-2));
  return e;
}

struct Buffers {
  Tensor p, g, m, v;
};

Buffers make_buffers(int64_t n, Device d) {
  Buffers b;
  b.p = Tensor::from_floats(randn(n, 1), {n}, DType::F32).to(d);
  b.g = Tensor::zeros({n}, DType::F32, d);
  b.m = Tensor::zeros({n}, DType::F32, d);
  b.v = Tensor::zeros({n}, DType::F32, d);
  return b;
}

ops::AdamWOptions options() {
  ops::AdamWOptions o;
  o.lr = 1e-2f;
  o.beta1 = 0.9f;
  o.beta2 = 0.95f;
  o.eps = 1e-8f;
  o.weight_decay = 0.1f;
  o.grad_scale = 0.5f;
  return o;
}

// Runs five steps on `device` and checks p, m, v against the double reference at each.
void check_against_reference(Device device, int64_t n, bool with_copy) {
  Buffers b = make_buffers(n, device);
  RefAdamW ref{to_d(b.p.to_floats()), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  Tensor copy = with_copy ? Tensor::zeros({n}, DType::BF16, device) : Tensor();
  ops::AdamWOptions o = options();
  for (int64_t step = 1; step <= 5; ++step) {
    const auto gv = randn(n, 100 + step, 3.f);
    b.g.copy_(Tensor::from_floats(gv, {n}, DType::F32));
    o.step = step;
    ops::adamw_step(b.p, b.g, b.m, b.v, o, copy);
    ref.step(to_d(gv), o, o.grad_scale);
    // fp32 arithmetic against double: a few ulps per step, relative to each value.
    EXPECT_LT(max_rel(to_d(b.p.to_floats()), ref.p), 1e-5) << "step " << step;
    EXPECT_LT(max_rel(to_d(b.m.to_floats()), ref.m), 1e-5) << "step " << step;
    EXPECT_LT(max_rel(to_d(b.v.to_floats()), ref.v), 1e-5) << "step " << step;
    if (with_copy) {
      const auto pv = b.p.to_floats(), cv = copy.to_floats();
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(cv[i], bf16_to_float(float_to_bf16(pv[i]))) << i;
    }
  }
}

TEST(AdamW, CpuMatchesDoubleReferenceOverSteps) {
  check_against_reference(Device::cpu(), 1003, false);
  check_against_reference(Device::cpu(), 64, true);
}

TEST(AdamW, ClipsByTheDeviceNormAndSkipsNonFiniteSteps) {
  const int64_t n = 257;
  Buffers b = make_buffers(n, Device::cpu());
  const auto gv = randn(n, 7, 10.f);
  b.g.copy_(Tensor::from_floats(gv, {n}, DType::F32));
  RefAdamW ref{to_d(b.p.to_floats()), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  ops::AdamWOptions o = options();
  o.grad_norm = ops::grad_norm(b.g).norm;
  o.max_grad_norm = 1.f;
  double norm = 0;
  for (float g : gv) norm += double(g) * g;
  norm = std::sqrt(norm) * o.grad_scale;
  ops::adamw_step(b.p, b.g, b.m, b.v, o);
  ref.step(to_d(gv), o, o.grad_scale * std::min(1.0, 1.0 / (norm + 1e-6)));
  EXPECT_LT(max_rel(to_d(b.m.to_floats()), ref.m), 1e-5);
  EXPECT_LT(max_rel(to_d(b.p.to_floats()), ref.p), 1e-5);

  // An inf in the gradients: the step leaves everything as it was.
  const auto p_before = b.p.to_floats(), m_before = b.m.to_floats();
  b.g.data<float>()[3] = INFINITY;
  o.grad_norm = ops::grad_norm(b.g).norm;
  o.step = 2;
  ops::adamw_step(b.p, b.g, b.m, b.v, o);
  EXPECT_EQ(b.p.to_floats(), p_before);
  EXPECT_EQ(b.m.to_floats(), m_before);
}

TEST(AdamW, BadInputsNameTheOp) {
  Buffers b = make_buffers(16, Device::cpu());
  const ops::AdamWOptions o = options();
  expect_error([&] { ops::adamw_step(b.p, Tensor::zeros({15}, DType::F32), b.m, b.v, o); }, "[adamw_step]",
               {"grads", "15", "16"});
  expect_error([&] { ops::adamw_step(b.p, b.g, Tensor::zeros({16}, DType::BF16), b.v, o); }, "[adamw_step]",
               {"m", "bf16"});
  expect_error([&] { ops::adamw_step(b.p, b.g, b.m, b.v, o, Tensor::zeros({16}, DType::F32)); }, "[adamw_step]",
               {"working copy", "f32"});
  ops::AdamWOptions bad = o;
  bad.step = 0;
  expect_error([&] { ops::adamw_step(b.p, b.g, b.m, b.v, bad); }, "[adamw_step]", {"step"});
  bad = o;
  bad.max_grad_norm = 1.f;
  expect_error([&] { ops::adamw_step(b.p, b.g, b.m, b.v, bad); }, "[adamw_step]", {"grad_norm"});
  expect_error([&] { ops::adamw_step(Tensor::zeros({4, 4}, DType::F32).transpose(0, 1), b.g, b.m, b.v, o); },
               "[adamw_step]", {"contiguous"});
}

TEST(AdamWCuda, MatchesDoubleReferenceWithWorkingCopy) {
  FT_REQUIRE_CUDA();
  // 4099: the float4 body plus a 3-element tail.
  check_against_reference(Device::cuda(), 4099, true);
  check_against_reference(Device::cuda(), 1000, false);
}

TEST(AdamWCuda, MatchesCpuWithClippingMisalignmentAndSkip) {
  FT_REQUIRE_CUDA();
  const int64_t n = 5000;
  const Device gpu = Device::cuda();
  Buffers c = make_buffers(n + 1, Device::cpu());
  Buffers g = make_buffers(n + 1, gpu);
  const auto gv = randn(n + 1, 8, 10.f);
  c.g.copy_(Tensor::from_floats(gv, {n + 1}, DType::F32));
  g.g.copy_(c.g);
  // Views one element in: 4-byte aligned only, so the kernel takes its scalar path.
  auto view = [n](const Tensor& t) { return t.slice(0, 1, n + 1); };
  Tensor copy_c = Tensor::zeros({n}, DType::F16), copy_g = Tensor::zeros({n}, DType::F16, gpu);
  ops::AdamWOptions oc = options(), og = options();
  oc.max_grad_norm = og.max_grad_norm = 1.f;
  oc.grad_norm = ops::grad_norm(view(c.g)).norm;
  og.grad_norm = ops::grad_norm(view(g.g)).norm;
  ops::adamw_step(view(c.p), view(c.g), view(c.m), view(c.v), oc, copy_c);
  ops::adamw_step(view(g.p), view(g.g), view(g.m), view(g.v), og, copy_g);
  // Same fp32 formula; the GPU may contract multiply-adds into FMAs: a few ulps.
  EXPECT_LT(test::rel_error(g.p, c.p), 1e-6);
  EXPECT_LT(test::rel_error(g.m, c.m), 1e-6);
  EXPECT_LT(test::rel_error(g.v, c.v), 1e-6);
  EXPECT_LT(test::rel_error(copy_g, copy_c), 1e-3);  // f16 rounding of nearly equal values
  // A NaN gradient: the GPU step is skipped without the host looking at the norm.
  const auto before = g.p.to_floats();
  g.g.fill_(NAN);
  og.grad_norm = ops::grad_norm(g.g).norm;
  og.step = 2;
  ops::adamw_step(g.p, g.g, g.m, g.v, og);
  EXPECT_EQ(g.p.to_floats(), before);
}

}  // namespace
}  // namespace ft
