// GELU where GPT-2 small applies it: the MLP's hidden activations (B*T = 16384, 4C = 3072), bf16.
// Bytes: forward reads x and writes y; backward reads dy and x and writes dx.
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "ops/elementwise.h"
#include "ops/gelu.h"

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
  constexpr int64_t N = 16384, H = 3072;
  const Tensor x = random_rows(N, H, 1);
  const Tensor dy = random_rows(N, H, 2);
  const double act = 2.0 * N * H;
  std::vector<OpBench> v;
  v.push_back({"gelu fwd bf16 (16384, 3072)", 2 * act, 0, [=] { ops::gelu_forward(x); }});
  v.push_back({"gelu bwd bf16 (16384, 3072)", 3 * act, 0, [=] { ops::gelu_backward(dy, x); }});
  v.push_back({"gelu fwd+bwd bf16 (16384, 3072)", 5 * act, 0, [=] {
                 ops::gelu_forward(x);
                 ops::gelu_backward(dy, x);
               }});
  return v;
}

const Registration reg("gelu", make);

}  // namespace
}  // namespace ft::bench
