// Inputs for the op benchmarks.
#pragma once

#include <random>
#include <vector>

#include "core/tensor.h"
#include "ops/elementwise.h"

namespace ft::bench {

// A bf16 (n) row of Normal(0, scale) values on the GPU. Random (rows, n) tensors at these sizes
// take seconds to draw on the host; broadcasting one random row gives realistic values for free
// (the kernels' work does not depend on them).
inline Tensor random_row(int64_t n, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return Tensor::from_floats(v, {n}, DType::BF16).to(Device::cuda());
}

// (rows, n) bf16 on the GPU, every row equal to random_row(n, seed).
inline Tensor random_rows(int64_t rows, int64_t n, uint64_t seed, float scale = 1.f) {
  return ops::add(Tensor::zeros({rows, n}, DType::BF16, Device::cuda()), random_row(n, seed, scale));
}

}  // namespace ft::bench
