// Bias gradients: bf16 sums over axis 0 of (B*T, C) at GPT-2 small widths. Informational (not
// part of issue 2's bar, target 0): 24-75 MB reads are short enough for launch latency to show.
#include "bench/ops/bench_registry.h"
#include "ops/reduce.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  std::vector<OpBench> v;
  for (int64_t c : {768, 2304, 3072}) {
    const Tensor g = Tensor::full({16384, c}, 0.01, DType::BF16, Device::cuda());
    v.push_back({str("sum axis 0 bf16 (16384, ", c, ")"), 2.0 * g.numel() + 2.0 * c, 0,
                 [=] { ops::sum(g, 0); }, "copy", 0.0});
  }
  return v;
}

const Registration reg("reduce", make);

}  // namespace
}  // namespace ft::bench
