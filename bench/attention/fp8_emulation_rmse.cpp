// FlashAttention-3's FP8 numerics experiment on the CPU emulation of our FP8 attention (no GPU):
// Q, K, V ~ N(0, 1) + N(0, 100) * Bernoulli(0.001), bf16; RMSE of the output against float64
// attention for per-tensor FP8, block FP8 and block FP8 + Hadamard (P in e4m3 as the kernel does).
// A second table is the error budget: the RMSE when only one of Q, K, V or P is rounded to e4m3
// (everything else exact), for per-tensor and for block + Hadamard. It says which rounding sets the
// floor that block scales and the rotation cannot lower (V is never rotated: a rotation of V
// along D would leave its relative rounding error, and so O's, unchanged).
// Prints markdown tables.
//   fp8_emulation_rmse [T ...]          (default T = 1024 2048 4096; D = 64 and 128; B = 1, H = 2)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/cpu/attention_fp8_reference.h"
#include "ops/cpu/attention_reference.h"
#include "tests/ops/attention_fp8_test_util.h"

namespace {

using namespace ft;

struct Inputs {
  AttentionParams cfg;
  std::vector<float> q, k, v;  // bf16 values
  std::vector<double> exact;   // float64 attention of q, k, v
};

Inputs make_inputs(int D, int T) {
  Inputs in;
  in.cfg.B = 1, in.cfg.H = 2, in.cfg.T = T, in.cfg.D = D, in.cfg.causal = false;
  in.cfg.softmax_scale = 1.f / std::sqrt(static_cast<float>(D));
  const size_t n = static_cast<size_t>(T) * in.cfg.H * D;
  in.q = testing_fp8::outlier_values(n, 41), in.k = testing_fp8::outlier_values(n, 42);
  in.v = testing_fp8::outlier_values(n, 43);
  const std::vector<double> qd(in.q.begin(), in.q.end()), kd(in.k.begin(), in.k.end()), vd(in.v.begin(), in.v.end());
  std::vector<double> lse(static_cast<size_t>(in.cfg.H) * T);
  in.exact.resize(n);
  cpu::attention_reference_forward(in.cfg, qd.data(), kd.data(), vd.data(), in.exact.data(), lse.data());
  return in;
}

// x (B = 1, T, H, D) rotated like the quantiser rotates Q and K (signs, then H_D / sqrt(D)), in
// float64, or x itself when signs is null.
std::vector<double> rotated(const std::vector<float>& x, int D, const uint32_t* signs) {
  std::vector<double> out(x.begin(), x.end());
  if (!signs) return out;
  std::vector<float> row(D);
  for (size_t r = 0; r < x.size() / D; ++r) {
    row.assign(x.begin() + r * D, x.begin() + (r + 1) * D);
    cpu::fp8_rotate_inplace(row.data(), D, signs);
    for (int d = 0; d < D; ++d) out[r * D + d] = row[d] / std::sqrt(static_cast<double>(D));
  }
  return out;
}

// RMSE with one rounding only: operand 0..2 = Q, K, V quantised (P exact), 3 = P in e4m3 only.
double one_rounding_rmse(const Inputs& in, int operand, bool block, const uint32_t* signs) {
  const AttentionParams& c = in.cfg;
  const bool per_tensor = !block;
  std::vector<double> q = rotated(in.q, c.D, signs), k = rotated(in.k, c.D, signs), v(in.v.begin(), in.v.end());
  if (operand == 0) q = cpu::fp8_round_trip(in.q.data(), 1, c.T, c.H, c.D, Fp8Operand::kQ, per_tensor, signs);
  if (operand == 1) k = cpu::fp8_round_trip(in.k.data(), 1, c.T, c.H, c.D, Fp8Operand::kK, per_tensor, signs);
  if (operand == 2) v = cpu::fp8_round_trip(in.v.data(), 1, c.T, c.H, c.D, Fp8Operand::kV, per_tensor, nullptr);
  std::vector<double> o(in.exact.size()), lse(static_cast<size_t>(c.H) * c.T);
  if (operand == 3) cpu::fp8_attention_emulate(c, q.data(), k.data(), v.data(), o.data());
  else cpu::attention_reference_forward(c, q.data(), k.data(), v.data(), o.data(), lse.data());
  return testing_fp8::rmse(o, in.exact);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> Ts;
  for (int i = 1; i < argc; ++i) Ts.push_back(std::atoi(argv[i]));
  if (Ts.empty()) Ts = {1024, 2048, 4096};
  std::vector<Inputs> cases;
  for (int D : {64, 128})
    for (int T : Ts) cases.push_back(make_inputs(D, T));

  std::printf("| D | T | per-tensor | block | block + Hadamard | per-tensor / block+Hadamard |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Inputs& in : cases) {
    std::vector<double> o(in.exact.size());
    double e[3];
    const bool block[3] = {false, true, true}, had[3] = {false, false, true};
    for (int i = 0; i < 3; ++i) {
      cpu::fp8_attention_forward_emulated(in.cfg, in.q.data(), in.k.data(), in.v.data(), block[i], had[i], 1, o.data());
      e[i] = testing_fp8::rmse(o, in.exact);
    }
    std::printf("| %d | %d | %.2e | %.2e | %.2e | %.2fx |\n", in.cfg.D, in.cfg.T, e[0], e[1], e[2], e[0] / e[2]);
    std::fflush(stdout);
  }

  std::printf("\nError budget: RMSE with only one rounding (per-tensor / block + Hadamard); the last column is\n"
              "the largest ratio any improvement of Q and K alone could give: per-tensor RMSE over the\n"
              "block + Hadamard error of V and P alone (sqrt(V^2 + P^2)).\n\n");
  std::printf("| D | T | Q only | K only | V only | P only | ratio ceiling with exact Q K^T |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const Inputs& in : cases) {
    uint32_t signs[8];
    cpu::fp8_hadamard_signs(1, in.cfg.D, signs);
    double pt[4], bh[4];
    for (int op = 0; op < 4; ++op) {
      pt[op] = one_rounding_rmse(in, op, false, nullptr);
      bh[op] = one_rounding_rmse(in, op, true, signs);
    }
    std::vector<double> o(in.exact.size());
    cpu::fp8_attention_forward_emulated(in.cfg, in.q.data(), in.k.data(), in.v.data(), false, false, 1, o.data());
    const double per_tensor = testing_fp8::rmse(o, in.exact);
    std::printf("| %d | %d | %.2e / %.2e | %.2e / %.2e | %.2e / %.2e | %.2e / %.2e | %.2fx |\n", in.cfg.D, in.cfg.T,
                pt[0], bh[0], pt[1], bh[1], pt[2], bh[2], pt[3], bh[3],
                per_tensor / std::sqrt(bh[2] * bh[2] + bh[3] * bh[3]));
    std::fflush(stdout);
  }
  return 0;
}
