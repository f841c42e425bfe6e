// FlashAttention-3's FP8 numerics experiment on the CPU emulation of our FP8 attention (no GPU):
// Q, K, V ~ N(0, 1) + N(0, 100) * Bernoulli(0.001), bf16; RMSE of the output against float64
// attention for per-tensor FP8, block FP8 and block FP8 + Hadamard (P in e4m3 as the kernel does).
// Prints a markdown table.
//   fp8_emulation_rmse [T ...]          (default T = 1024 2048 4096; D = 64 and 128; B = 1, H = 2)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ops/cpu/attention_fp8_reference.h"
#include "ops/cpu/attention_reference.h"
#include "tests/ops/attention_fp8_test_util.h"

int main(int argc, char** argv) {
  using namespace ft;
  std::vector<int> Ts;
  for (int i = 1; i < argc; ++i) Ts.push_back(std::atoi(argv[i]));
  if (Ts.empty()) Ts = {1024, 2048, 4096};
  std::printf("| D | T | per-tensor | block | block + Hadamard | per-tensor / block+Hadamard |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (int D : {64, 128})
    for (int T : Ts) {
      AttentionParams cfg;
      cfg.B = 1, cfg.H = 2, cfg.T = T, cfg.D = D, cfg.causal = false;
      cfg.softmax_scale = 1.f / std::sqrt(static_cast<float>(D));
      const size_t n = static_cast<size_t>(T) * cfg.H * D;
      const auto q = testing_fp8::outlier_values(n, 41), k = testing_fp8::outlier_values(n, 42),
                 v = testing_fp8::outlier_values(n, 43);
      const std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end());
      std::vector<double> exact(n), lse(static_cast<size_t>(cfg.H) * T), o(n);
      cpu::attention_reference_forward(cfg, qd.data(), kd.data(), vd.data(), exact.data(), lse.data());
      double e[3];
      const bool block[3] = {false, true, true}, had[3] = {false, false, true};
      for (int i = 0; i < 3; ++i) {
        cpu::fp8_attention_forward_emulated(cfg, q.data(), k.data(), v.data(), block[i], had[i], 1, o.data());
        e[i] = testing_fp8::rmse(o, exact);
      }
      std::printf("| %d | %d | %.2e | %.2e | %.2e | %.2fx |\n", D, T, e[0], e[1], e[2], e[0] / e[2]);
      std::fflush(stdout);
    }
  return 0;
}
