// GELU where GPT-2 small applies it: the MLP's hidden activations (B*T = 16384, 4C = 3072), bf16.
// Bytes: forward reads x and writes y; backward reads dy and x and writes dx.
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "bench/ops/bench_util.h"
#include "ops/elementwise.h"
#include "ops/gelu.h"

namespace ft::bench {
namespace {

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
