// Cross-entropy over GPT-2's vocabulary: logits (B*T = 16384, V = 50257) bf16, int32 targets.
// Bytes: forward reads the logits once (+ targets) and writes loss and lse; backward reads the
// logits once (+ targets, lse, dloss) and writes dlogits once.
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "bench/ops/bench_util.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"

namespace ft::bench {
namespace {

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
