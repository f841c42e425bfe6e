// The fused AdamW step over GPT-2 small's parameter count, against the copy bandwidth.
// Bytes: read p, g, m, v and write p, m, v (28 per parameter), plus 2 for the bf16 copy.
#include "bench/ops/bench_registry.h"
#include "ops/adamw.h"
#include "ops/grad_norm.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  constexpr int64_t kParams = 124439808;  // GPT-2 small, tied embeddings
  const Device gpu = Device::cuda();
  const Tensor p = Tensor::full({kParams}, 0.02, DType::F32, gpu), g = Tensor::full({kParams}, 1e-3, DType::F32, gpu);
  const Tensor m = Tensor::zeros({kParams}, DType::F32, gpu), v = Tensor::zeros({kParams}, DType::F32, gpu);
  const Tensor copy = Tensor::empty({kParams}, DType::BF16, gpu);
  ops::AdamWOptions o;
  o.lr = 6e-4f;
  o.beta2 = 0.95f;
  o.weight_decay = 0.1f;
  // The trainer's configuration: clip by the device-side norm, no host round trip.
  ops::AdamWOptions clipped = o;
  clipped.grad_norm = ops::grad_norm(g).norm;
  clipped.max_grad_norm = 1.f;
  const double n = static_cast<double>(kParams);
  std::vector<OpBench> out;
  out.push_back({"adamw 124M f32", 28 * n, 0, [=] { ops::adamw_step(p, g, m, v, o); }});
  out.push_back({"adamw 124M f32 + bf16 copy, clipped", 30 * n, 0,
                 [=] { ops::adamw_step(p, g, m, v, clipped, copy); }});
  return out;
}

const Registration reg("adamw", make);

}  // namespace
}  // namespace ft::bench
