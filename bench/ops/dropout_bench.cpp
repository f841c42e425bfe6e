// Dropout on GPT-2 small activations in bf16 (B*T = 16384): residual-stream width (C = 768) and
// MLP width (4C = 3072). Bytes: read x, write y.
#include "bench/ops/bench_registry.h"
#include "ops/dropout.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  std::vector<OpBench> v;
  for (int64_t c : {768, 3072}) {
    const Tensor x = Tensor::full({16384, c}, 1.0, DType::BF16, Device::cuda());
    const double bytes = 2.0 * 2.0 * x.numel();
    v.push_back({str("dropout bf16 (16384, ", c, ") p=0.1"), bytes, 0,
                 [=] { ops::dropout(x, 0.1f, PhiloxState{1, 0}); }});
  }
  return v;
}

const Registration reg("dropout", make);

}  // namespace
}  // namespace ft::bench
