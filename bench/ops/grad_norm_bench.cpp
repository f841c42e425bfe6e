// Global gradient norm over GPT-2 small's gradient arena (reads 4 bytes per parameter).
#include "bench/ops/bench_registry.h"
#include "ops/grad_norm.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  constexpr int64_t kParams = 124439808;
  const Tensor g = Tensor::full({kParams}, 1e-3, DType::F32, Device::cuda());
  return {{"grad_norm 124M f32", 4.0 * kParams, 0, [=] { ops::grad_norm(g); }}};
}

const Registration reg("grad_norm", make);

}  // namespace
}  // namespace ft::bench
