// linear_cross_entropy_mean: the head and mean loss whose forward already writes dlogits for a
// hinted upstream gradient, and whose backward rescales them to the actual one on the device.
// References: the unfused head (matmul, cross_entropy_mean) in float64 on the CPU, and finite
// differences -- never the op itself.
#include <gtest/gtest.h>

#include "autograd/functions/cross_entropy.h"
#include "autograd/functions/linear_cross_entropy_mean.h"
#include "autograd/functions/matmul.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "core/cuda/graph.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::autograd {
namespace {

using test::randn_tensor;

// Two ignored rows (-1) and both ends of the vocabulary (V = 7): 4 valid rows of 6.
const std::vector<int32_t> kTargets = {0, 6, -1, 3, -1, 6};
constexpr int64_t kValid = 4;

// Float64 gradcheck with a hint of 8: gradcheck's upstream gradient is random, so neither 1 nor
// the hint, and the backward must rescale dlogits by upstream / hint to pass. In one pass and in
// chunks of rows (4 then 2 of the 6: the forward runs the products chunk by chunk, the backward
// rescales them).
TEST(LinearCrossEntropyMeanGrad, GradcheckWithAHintThatIsNotTheUpstream) {
  const Tensor x = randn_tensor({2, 3, 5}, 41, DType::F64), w = randn_tensor({7, 5}, 42, DType::F64);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  const Tensor hint = Tensor::full({}, 8.0, DType::F64);
  for (int64_t chunk : {0, 4})
    for (const Tensor& h : {hint, Tensor()}) {
      GradcheckOptions opts;
      opts.skip = {2};
      const GradcheckResult r = gradcheck(
          [&](const std::vector<Tensor>& in) {
            return linear_cross_entropy_mean(in[0], in[1], in[2], kValid, h, -1, {-1, chunk}).loss;
          },
          {x, w, targets}, opts);
      EXPECT_TRUE(r.ok) << (h.defined() ? "hint 8, " : "no hint, ") << "chunk rows " << chunk << ": " << r.message;
    }
}

struct Reference {
  Tensor loss, logits, dx, dw;
};
// The unfused head in float64: logits = x w^T, the mean cross-entropy over kValid rows, backward
// seeded with `upstream`.
Reference unfused_f64(const Tensor& x0, const Tensor& w0, const Tensor& targets, double upstream) {
  // Fresh leaves (a cast to f64 of f64 is the same tensor): each reference has its own gradients.
  const Tensor x = ops::cast(x0.to(Device::cpu()), DType::F64).clone();
  const Tensor w = ops::cast(w0.to(Device::cpu()), DType::F64).clone();
  set_requires_grad(x);
  set_requires_grad(w);
  ops::MatmulOptions o;
  o.trans_b = true;
  const Tensor logits = matmul(x, w, o);
  const Tensor loss = cross_entropy_mean(logits, targets.to(Device::cpu()), -1, kValid);
  backward(loss, Tensor::full({}, upstream, DType::F64));
  return {loss.detach(), logits.detach(), grad(x), grad(w)};
}

// Upstream 3, hint 8: the loss and both gradients are the unfused head's to float64 rounding,
// and the logits' buffer holds the dlogits of the hint, (softmax - onehot) * 8 / kValid.
TEST(LinearCrossEntropyMeanGrad, MatchesTheUnfusedHeadForAnyUpstream) {
  const Tensor x0 = randn_tensor({2, 3, 5}, 43, DType::F64), w0 = randn_tensor({7, 5}, 44, DType::F64);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  const Reference ref = unfused_f64(x0, w0, targets, 3.0);
  const Reference at_hint = unfused_f64(x0, w0, targets, 8.0);
  const Tensor x = x0.clone(), w = w0.clone();
  set_requires_grad(x);
  set_requires_grad(w);
  const LinearCrossEntropyMeanOut out =
      linear_cross_entropy_mean(x, w, targets, kValid, Tensor::full({}, 8.0, DType::F64));
  EXPECT_EQ(out.loss.shape(), Shape{});
  EXPECT_LT(test::rel_error(out.loss, ref.loss), 1e-14);
  // dlogits = (softmax - onehot) * 8 / kValid, from the reference's logits.
  const ops::CrossEntropyOut ce = ops::cross_entropy_forward(ref.logits, targets);
  const Tensor dlogits = ops::cross_entropy_backward(Tensor::full({2, 3}, 8.0 / kValid, DType::F64), ref.logits,
                                                     targets, ce.lse);
  EXPECT_LT(test::rel_error(out.logits, dlogits), 1e-13) << "the forward already wrote dlogits";
  backward(out.loss, Tensor::full({}, 3.0, DType::F64));
  EXPECT_LT(test::rel_error(grad(x), ref.dx), 1e-13);
  EXPECT_LT(test::rel_error(grad(w), ref.dw), 1e-13);
  EXPECT_GT(test::rel_error(grad(x), at_hint.dx), 0.5) << "the gradient of upstream 3, not of the hint";
}

// In chunks of rows (1, 4 and 5 of the 6), upstream 3, hint 8: the unfused head's loss and
// gradients to float64 rounding, and no logits to return.
TEST(LinearCrossEntropyMeanGrad, InChunksMatchesTheUnfusedHeadForAnyUpstream) {
  const Tensor x0 = randn_tensor({2, 3, 5}, 43, DType::F64), w0 = randn_tensor({7, 5}, 44, DType::F64);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  const Reference ref = unfused_f64(x0, w0, targets, 3.0);
  for (int64_t chunk : {1, 4, 5}) {
    const Tensor x = x0.clone(), w = w0.clone();
    set_requires_grad(x);
    set_requires_grad(w);
    const LinearCrossEntropyMeanOut out =
        linear_cross_entropy_mean(x, w, targets, kValid, Tensor::full({}, 8.0, DType::F64), -1, {-1, chunk});
    EXPECT_LT(test::rel_error(out.loss, ref.loss), 1e-14) << "chunk " << chunk;
    EXPECT_FALSE(out.logits.defined()) << "chunk " << chunk;
    backward(out.loss, Tensor::full({}, 3.0, DType::F64));
    EXPECT_LT(test::rel_error(grad(x), ref.dx), 1e-13) << "chunk " << chunk;
    EXPECT_LT(test::rel_error(grad(w), ref.dw), 1e-13) << "chunk " << chunk;
  }
}

// Without recorded gradients it is the forward-only head: the logits stay logits.
TEST(LinearCrossEntropyMeanGrad, NoGradKeepsTheLogitsReadable) {
  const Tensor x = randn_tensor({2, 3, 5}, 45, DType::F64), w = randn_tensor({7, 5}, 46, DType::F64);
  const Tensor targets = Tensor::from_vector(kTargets, {2, 3});
  const Reference ref = unfused_f64(x, w, targets, 1.0);
  set_requires_grad(x);
  NoGradGuard no_grad;
  const LinearCrossEntropyMeanOut out =
      linear_cross_entropy_mean(x, w, targets, kValid, Tensor::full({}, 8.0, DType::F64));
  EXPECT_LT(test::rel_error(out.logits, ref.logits), 1e-14);
  EXPECT_LT(test::rel_error(out.loss, ref.loss), 1e-14);
  EXPECT_FALSE(requires_grad(out.loss));
}

// CUDA, V = 1001 (rows padded to 1008), C = 64, the trainer's arrangement (w a leaf whose fp32
// gradient is preset and already holds a value, so dw is added in place with beta = 1 from
// device memory); fp16 and bf16 with the fp16-style hint 1024 and an upstream of 3 * 1024.
struct CudaCase {
  int64_t V = 1001, C = 64, B = 3, T = 37;
  Tensor targets, x, w, preset;
  int64_t valid = 0;
  explicit CudaCase(DType dt) {
    std::vector<int32_t> t(static_cast<size_t>(B * T));
    for (size_t i = 0; i < t.size(); ++i) {
      t[i] = i % 7 == 3 ? -1 : static_cast<int32_t>((i * 389) % V);
      valid += t[i] != -1;
    }
    targets = Tensor::from_vector(t, {B, T});
    x = randn_tensor({B, T, C}, 51, dt);
    w = randn_tensor({V, C}, 52, dt, Device::cpu(), 0.2f);
    preset = randn_tensor({V, C}, 53);
  }
  // The unfused float64 head with the same valid count.
  Reference reference(double upstream) const {
    const Tensor xd = ops::cast(x, DType::F64).clone(), wd = ops::cast(w, DType::F64).clone();
    set_requires_grad(xd);
    set_requires_grad(wd);
    ops::MatmulOptions o;
    o.trans_b = true;
    const Tensor logits = matmul(xd, wd, o);
    const Tensor loss = cross_entropy_mean(logits, targets, -1, valid);
    backward(loss, Tensor::full({}, upstream, DType::F64));
    return {loss.detach(), logits.detach(), grad(xd), grad(wd)};
  }
};

void expect_close(const Reference& ref, const Tensor& loss, const Tensor& dx, const Tensor& dw_added,
                  const Tensor& preset, const std::string& what) {
  EXPECT_LT(test::rel_error(loss, ref.loss), 1e-2) << what;
  EXPECT_LT(test::rel_error(dx, ref.dx), 2e-2) << what;
  const Tensor dw = ops::sub(ops::cast(dw_added.to(Device::cpu()), DType::F64), ops::cast(preset, DType::F64));
  EXPECT_LT(test::rel_error(dw, ref.dw), 2e-2) << what;
}

TEST(LinearCrossEntropyMeanGradCuda, Fp16AndBf16WithHint1024AndUpstream3072MatchF64) {
  FT_REQUIRE_CUDA();
  for (int64_t chunk : {0, 32})  // one pass; chunks of 32 of the 111 rows
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(str("chunk rows ", chunk));
    const CudaCase k(dt);
    const Reference ref = k.reference(3.0 * 1024);
    const Device gpu = Device::cuda();
    const Tensor x = k.x.to(gpu), w = k.w.to(gpu);
    set_requires_grad(x);
    set_requires_grad(w);
    const Tensor wgrad = k.preset.to(gpu).clone();  // f32, like the arena's view
    set_grad(w, wgrad);
    const Tensor hint = Tensor::full({}, 1024.0, DType::F32, gpu);
    const LinearCrossEntropyMeanOut out =
        linear_cross_entropy_mean(x, w, k.targets.to(gpu), k.valid, hint, -1, {-1, chunk});
    if (chunk == 0) EXPECT_EQ(out.logits.stride(-2), 1008);  // half rows padded to 16 bytes
    else EXPECT_FALSE(out.logits.defined());
    backward(out.loss, Tensor::full({}, 3.0 * 1024, DType::F32, gpu));
    EXPECT_TRUE(grad(w).is_same(wgrad)) << "the preset fp32 gradient is kept and added into";
    expect_close(ref, out.loss, grad(x), wgrad, k.preset, str(dt));
  }
}

// Under CUDA-graph capture: the forward and backward captured once (capture throws on any host
// read), then replayed with new hints and upstream gradients written into device memory; each
// replay gives the gradient of its own upstream. The eager run first builds the cuBLASLt plans.
TEST(LinearCrossEntropyMeanGradCuda, CapturedStepTakesEachReplaysHintAndUpstream) {
  FT_REQUIRE_CUDA();
  for (int64_t chunk : {0, 32}) {
  SCOPED_TRACE(str("chunk rows ", chunk));
  const CudaCase k(DType::BF16);
  const Device gpu = Device::cuda();
  const Tensor x = k.x.to(gpu), w = k.w.to(gpu), targets = k.targets.to(gpu);
  set_requires_grad(x);
  set_requires_grad(w);
  Tensor xgrad = Tensor::zeros({k.B, k.T, k.C}, DType::F32, gpu);
  Tensor wgrad = k.preset.to(gpu).clone();
  set_grad(x, xgrad);
  set_grad(w, wgrad);
  Tensor hint = Tensor::full({}, 1.0, DType::F32, gpu), upstream = Tensor::full({}, 1.0, DType::F32, gpu);
  Tensor loss = Tensor::zeros({}, DType::F32, gpu);
  auto step = [&] {
    const LinearCrossEntropyMeanOut out = linear_cross_entropy_mean(x, w, targets, k.valid, hint, -1, {-1, chunk});
    loss.copy_(out.loss.detach());
    backward(out.loss, upstream);
  };
  step();  // eager warm-up
  cuda::Graph graph(gpu.index);
  graph.capture(step);
  struct Replay {
    double hint, upstream;
  };
  for (const Replay r : {Replay{1024.0, 3.0 * 1024}, Replay{1.0, 1.0}, Replay{4.0, 0.5}}) {
    hint.fill_(r.hint);
    upstream.fill_(r.upstream);
    xgrad.zero_();
    wgrad.copy_(k.preset.to(gpu));
    graph.replay();
    expect_close(k.reference(r.upstream), loss, xgrad, wgrad, k.preset,
                 str("hint ", r.hint, " upstream ", r.upstream));
  }
  }
}

}  // namespace
}  // namespace ft::autograd
