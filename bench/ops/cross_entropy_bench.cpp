// Cross-entropy over GPT-2's vocabulary: logits (B*T = 16384, V = 50257) bf16, int32 targets.
// Bytes: forward reads the logits once (+ targets) and writes loss and lse; backward reads the
// logits once (+ targets, lse, dloss) and writes dlogits once.
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"

namespace ft::bench {
namespace {

// A bf16 (n) row of Normal(0, scale) values on the GPU. Random (rows, n) tensors at these sizes
// take seconds to draw on the host; broadcasting one random row gives realistic values for free
// (the kernels' work does not depend on them).
Tensor random_row(int64_t n, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return Tensor::from_floats(v, {n}, DType::BF16).to(Device::cuda());
}

// (rows, n) bf16 on the GPU, every row equal to random_row(n, seed).
Tensor random_rows(int64_t rows, int64_t n, uint64_t seed, float scale = 1.f) {
  return ops::add(Tensor::zeros({rows, n}, DType::BF16, Device::cuda()), random_row(n, seed, scale));
}

std::vector<OpBench> make() {
  constexpr int64_t N = 16384, V = 50257;
  const Device gpu = Device::cuda();
  const Tensor logits = random_rows(N, V, 1, 2.f);
  std::vector<int32_t> t(N);
  for (int64_t i = 0; i < N; ++i) t[i] = static_cast<int32_t>((i * 7919) % V);
  const Tensor targets = Tensor::from_vector(t, {N}).to(gpu);
  const Tensor dloss = Tensor::full({N}, 1.0 / N, DType::F32, gpu);
  const ops::CrossEntropyOut saved = ops::cross_entropy_forward(logits, targets);
  const double big = 2.0 * N * V;  // one bf16 (N, V) tensor
  const double fwd = big + 4.0 * N + 2 * 4.0 * N;
  const double bwd = 2 * big + 4.0 * N + 2 * 4.0 * N;
  std::vector<OpBench> v;
  v.push_back({"cross_entropy fwd bf16 (16384, 50257)", fwd, 0, [=] { ops::cross_entropy_forward(logits, targets); }});
  v.push_back({"cross_entropy bwd bf16 (16384, 50257)", bwd, 0,
               [=] { ops::cross_entropy_backward(dloss, logits, targets, saved.lse); }});
  v.push_back({"cross_entropy fwd+bwd bf16 (16384, 50257)", fwd + bwd, 0, [=] {
                 const ops::CrossEntropyOut o = ops::cross_entropy_forward(logits, targets);
                 ops::cross_entropy_backward(dloss, logits, targets, o.lse);
               }});
  return v;
}

const Registration reg("cross_entropy", make);

}  // namespace
}  // namespace ft::bench
