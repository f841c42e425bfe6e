// Helpers of the FP8 attention tests (CPU and CUDA): FlashAttention-3's outlier inputs and RMSE.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"

namespace ft::testing_fp8 {

// FlashAttention-3's numerics experiment: N(0, 1) plus, with probability 0.001 per entry, N(0, 100)
// (std 10), rounded to bf16 (what the op takes).
inline std::vector<float> outlier_values(size_t n, uint32_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::bernoulli_distribution outlier(0.001);
  std::vector<float> x(n);
  for (auto& e : x) {
    double v = normal(gen);
    if (outlier(gen)) v += 10.0 * normal(gen);
    e = bf16_to_float(float_to_bf16(static_cast<float>(v)));
  }
  return x;
}

template <class A, class B>
double rmse(const std::vector<A>& x, const std::vector<B>& ref) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(ref[i]);
    s += d * d;
  }
  return x.empty() ? 0 : std::sqrt(s / x.size());
}

}  // namespace ft::testing_fp8
