// Token embedding for GPT-2 small: ids (B*T = 16384) into wte (V = 50257, C = 768) bf16. No bar
// in the issue (target 0: informational). Bytes: forward reads the 16384 gathered rows and the
// ids and writes (16384, 768); backward reads dout and the ids and read-modify-writes the touched
// fp32 rows of a (V, C) gradient (counted as every id's row, an upper bound of distinct rows).
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "bench/ops/bench_util.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  constexpr int64_t N = 16384, V = 50257, C = 768;
  const Device gpu = Device::cuda();
  const Tensor wte = Tensor::full({V, C}, 0.02, DType::BF16, gpu);
  // A Zipf-like id stream: a few frequent tokens (long runs in the deterministic backward).
  std::vector<int32_t> ids(N);
  for (int64_t i = 0; i < N; ++i) ids[i] = static_cast<int32_t>(i % 10 == 0 ? 13 : (i * 7919) % V);
  const Tensor tid = Tensor::from_vector(ids, {N}).to(gpu);
  const Tensor dout = random_rows(N, C, 1);
  const Tensor dweight = Tensor::zeros({V, C}, DType::F32, gpu);
  const double act = 2.0 * N * C;
  std::vector<OpBench> v;
  v.push_back({"embedding fwd bf16 (16384) -> (16384, 768)", 2 * act + 4.0 * N, 0,
               [=] { ops::embedding_forward(tid, wte); }, "copy", 0.0});
  v.push_back({"embedding bwd bf16 -> fp32 (50257, 768), accumulate", act + 4.0 * N + 2 * 4.0 * N * C, 0,
               [=] { ops::embedding_backward_(dweight, dout, tid); }, "copy", 0.0});
  return v;
}

const Registration reg("embedding", make);

}  // namespace
}  // namespace ft::bench
