// Layernorm at GPT-2 small's shape: x (B*T = 16384, C = 768) bf16, weight and bias bf16.
// Bytes are the minimum: forward reads x and writes y (+ mean, rstd); backward reads dy and x
// (+ mean, rstd) and writes dx (+ fp32 dweight, dbias). Parameters are counted once.
#include <random>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "bench/ops/bench_util.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  constexpr int64_t N = 16384, C = 768;
  const Tensor x = random_rows(N, C, 1);
  const Tensor dy = random_rows(N, C, 2);
  const Tensor w = random_row(C, 3), b = random_row(C, 4);
  const ops::LayerNormOut saved = ops::layernorm_forward(x, w, b);
  const double act = 2.0 * N * C;        // one bf16 (N, C) tensor
  const double stats = 2.0 * 4.0 * N;    // mean and rstd, fp32
  const double params = 2.0 * 2.0 * C;   // weight and bias, bf16
  const double fwd = 2 * act + stats + params;
  const double bwd = 3 * act + stats + params / 2 + 2.0 * 4.0 * C;  // + fp32 dweight, dbias
  std::vector<OpBench> v;
  v.push_back({"layernorm fwd bf16 (16384, 768)", fwd, 0, [=] { ops::layernorm_forward(x, w, b); }});
  v.push_back({"layernorm bwd bf16 (16384, 768)", bwd, 0,
               [=] { ops::layernorm_backward(dy, x, w, saved.mean, saved.rstd); }});
  v.push_back({"layernorm fwd+bwd bf16 (16384, 768)", fwd + bwd, 0, [=] {
                 const ops::LayerNormOut o = ops::layernorm_forward(x, w, b);
                 ops::layernorm_backward(dy, x, w, o.mean, o.rstd);
               }});
  return v;
}

const Registration reg("layernorm", make);

}  // namespace
}  // namespace ft::bench
