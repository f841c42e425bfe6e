// Cross-entropy over GPT-2's vocabulary: logits (B*T = 16384, V = 50257) bf16, int32 targets.
// Bytes: forward reads the logits once (+ targets) and writes loss and lse; backward reads the
// logits once (+ targets, lse, dloss) and writes dlogits once. The "head" entries run on the
// training head's layout (rows padded to 50264, dlogits written over the logits): the two-pass
// forward + cross_entropy_backward_ against the one-pass cross_entropy_loss_and_grad_ (one read
// and one write of the padded rows; the bytes counted are the same for both, so GB/s compare).
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
  constexpr int64_t Vp = 50264;  // ops::aligned_cols(V, bf16)
  const Tensor full = Tensor::zeros({N, Vp}, DType::BF16, gpu);
  full.slice(1, 0, V).copy_(logits);
  const Tensor head = full.slice(1, 0, V);  // (N, V), rows Vp apart; rewritten in place by each run
  const Tensor hint = Tensor::full({}, 1.0, DType::F32, gpu);
  const double in_place = 2 * 2.0 * N * Vp + 4.0 * N + 4.0 * N;
  v.push_back({"cross_entropy head fwd+bwd_ in place bf16 (16384, 50257 of 50264)", in_place, 0, [=] {
                 const ops::CrossEntropyOut o = ops::cross_entropy_forward(head, targets);
                 ops::cross_entropy_backward_(dloss, head, targets, o.lse);
               }});
  v.push_back({"cross_entropy head loss_and_grad_ bf16 (16384, 50257 of 50264)", in_place, 0,
               [=] { ops::cross_entropy_loss_and_grad_(head, targets, hint, 1.0 / N); }});
  return v;
}

const Registration reg("cross_entropy", make);

}  // namespace
}  // namespace ft::bench
