// Helpers shared by the test suites: GPU skipping, random inputs, error norms.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

// Skips the current test, with the reason, on machines without a usable GPU.
#define FT_REQUIRE_CUDA()                                                   \
  do {                                                                      \
    if (!::ft::cuda_available()) GTEST_SKIP() << "no CUDA device available"; \
  } while (0)

namespace ft::test {

// Normal(0, scale) values from a fixed seed: fresh inputs per case, reproducible failures.
inline std::vector<float> randn(int64_t n, uint64_t seed, float scale = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

inline Tensor randn_tensor(const Shape& shape, uint64_t seed, DType dtype = DType::F32,
                           Device device = Device::cpu(), float scale = 1.f) {
  return Tensor::from_floats(randn(shape_numel(shape), seed, scale), shape, dtype).to(device);
}

// ||a - b|| / ||b|| over all elements (b is the reference). NaN anywhere gives +inf.
inline double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double rel_error(const Tensor& a, const Tensor& b) { return rel_error(a.to_doubles(), b.to_doubles()); }

// The systematic relative bias of a against the reference b: the mean of a / b - 1 over the
// elements with |b| > floor. Rounding noise averages out; a scale error (a parameter rounded to a
// coarser dtype, say) does not.
inline double mean_relative_bias(const std::vector<double>& a, const std::vector<double>& b, double floor = 0.1) {
  double sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(b[i]) <= floor) continue;
    sum += a[i] / b[i] - 1;
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_doubles(), y = b.to_doubles();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// Expects fn() to throw an ft::Error whose message starts with `op` (e.g. "[matmul]") and
// contains every string of `parts` (shapes, dtypes, values the message must name).
// The message of the ft::Error that `fn` throws ("" when it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

template <class Fn>
void expect_error(Fn&& fn, const std::string& op, const std::vector<std::string>& parts = {}) {
  try {
    fn();
    ADD_FAILURE() << "no exception; expected one starting with " << op;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(op, 0), 0u) << m;
    for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

}  // namespace ft::test
