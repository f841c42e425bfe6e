// Residual add + dropout + LayerNorm at GPT-2 small's shape (B*T = 16384, C = 768) bf16, p = 0.1:
// the fused op against the unfused ops it replaces (ops::dropout, ops::add, ops::layernorm_*).
// Bytes are the fused minimum: forward reads x, h and writes y, z (+ mean, rstd); backward reads
// gy, gz, y (+ mean, rstd) and writes dy, dh (+ fp32 dweight, dbias). Parameters counted once.
// The unfused rows carry the same byte counts, so their GB/s compare as speed.
#include <vector>

#include "bench/ops/bench_registry.h"
#include "bench/ops/bench_util.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "ops/residual_layernorm.h"

namespace ft::bench {
namespace {

std::vector<OpBench> make() {
  constexpr int64_t N = 16384, C = 768;
  constexpr float kP = 0.1f;
  const PhiloxState state{1, 0};
  const Tensor x = random_rows(N, C, 1), h = random_rows(N, C, 2);
  const Tensor gy = random_rows(N, C, 3), gz = random_rows(N, C, 4);
  const Tensor w = random_row(C, 5), b = random_row(C, 6);
  const ops::ResidualLayerNormOut saved = ops::residual_layernorm_forward(x, h, w, b, 1e-5, kP, state);
  const double act = 2.0 * N * C;       // one bf16 (N, C) tensor
  const double stats = 2.0 * 4.0 * N;   // mean and rstd, fp32
  const double params = 2.0 * 2.0 * C;  // weight and bias, bf16
  const double fwd = 4 * act + stats + params;
  const double bwd = 5 * act + stats + params / 2 + 2.0 * 4.0 * C;
  std::vector<OpBench> v;
  v.push_back({"residual_layernorm fwd bf16 p=0.1 (16384, 768)", fwd, 0,
               [=] { ops::residual_layernorm_forward(x, h, w, b, 1e-5, kP, state); }});
  v.push_back({"unfused dropout+add+layernorm fwd bf16 p=0.1 (16384, 768)", fwd, 0,
               [=] { ops::layernorm_forward(ops::add(x, ops::dropout(h, kP, state)), w, b); }});
  v.push_back({"residual_layernorm bwd bf16 p=0.1 (16384, 768)", bwd, 0, [=] {
                 ops::residual_layernorm_backward(gy, gz, saved.y, w, saved.mean, saved.rstd, kP, state);
               }});
  v.push_back({"unfused layernorm+add+dropout bwd bf16 p=0.1 (16384, 768)", bwd, 0, [=] {
                 const ops::LayerNormGrads g = ops::layernorm_backward(gz, saved.y, w, saved.mean, saved.rstd);
                 ops::dropout_backward(ops::add(gy, g.dx), kP, state);
               }});
  return v;
}

const Registration reg("residual_layernorm", make);

}  // namespace
}  // namespace ft::bench
