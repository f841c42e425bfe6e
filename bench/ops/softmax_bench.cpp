// Softmax at the naive attention's shape for GPT-2 small: B*H*T = 16*12*1024 rows of T = 1024,
// bf16. No bar in the issue (target 0: informational). Bytes: forward reads x, writes y;
// backward reads y and dy, writes dx.
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "bench/ops/bench_util.h"
#include "ops/elementwise.h"
#include "ops/softmax.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  constexpr int64_t R = 16 * 12 * 1024, T = 1024;
  const Tensor x = random_rows(R, T, 1, 2.f);
  const Tensor dy = random_rows(R, T, 2);
  const Tensor y = ops::softmax_forward(x);
  const double act = 2.0 * R * T;
  std::vector<OpBench> v;
  v.push_back({"softmax fwd bf16 (196608, 1024)", 2 * act, 0, [=] { ops::softmax_forward(x); }, "copy", 0.0});
  v.push_back({"softmax bwd bf16 (196608, 1024)", 3 * act, 0, [=] { ops::softmax_backward(dy, y); }, "copy", 0.0});
  return v;
}

const Registration reg("softmax", make);

}  // namespace
}  // namespace ft::bench
