// Helpers shared by the attention tests: random inputs, relative errors, case names.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/attention_params.h"
#include "ops/cpu/attention_reference.h"

namespace ft::testing_attention {

// Values representable in `dtype`, uniform in [-a, a].
inline std::vector<float> random_values(size_t n, uint32_t seed, float a, AttentionDType dtype) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-a, a);
  std::vector<float> x(n);
  for (auto& e : x) e = cpu::round_to_dtype(dtype, dist(gen));
  return x;
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// ||x - ref|| / ||ref|| (Frobenius); NaN anywhere gives +inf; ref = 0 gives ||x||.
inline double rel_error(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return INFINITY;
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline bool identically_zero(const std::vector<double>& x) {
  for (double e : x)
    if (e != 0) return false;
  return true;
}
inline double rms(const std::vector<float>& x) {
  double s = 0;
  for (float e : x) s += static_cast<double>(e) * e;
  return x.empty() ? 0 : std::sqrt(s / x.size());
}

// Max |x - ref| over finite ref entries; entries where ref = -inf must be -inf in x too.
inline double lse_error(const std::vector<float>& x, const std::vector<double>& ref) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (!(std::isinf(x[i]) && x[i] < 0)) return INFINITY;
      continue;
    }
    if (std::isnan(x[i])) return INFINITY;
    e = std::max(e, std::abs(x[i] - ref[i]));
  }
  return e;
}

struct AttentionCase {
  int B, H, T, D;
  bool causal;
  float dropout_p;
  AttentionDType dtype = AttentionDType::kBF16;
  int block_size = 0, window_blocks = 0, global_blocks = 0;
};

inline std::string case_name(const AttentionCase& c) {
  return "B" + std::to_string(c.B) + "_H" + std::to_string(c.H) + "_T" + std::to_string(c.T) +
         "_D" + std::to_string(c.D) + (c.causal ? "_causal" : "_full") + "_p" +
         std::to_string(static_cast<int>(c.dropout_p * 100)) +
         (c.dtype == AttentionDType::kBF16 ? "_bf16" : "_f16") +
         (c.block_size ? "_bs" + std::to_string(c.block_size) + "w" +
                             std::to_string(c.window_blocks) + "g" + std::to_string(c.global_blocks)
                       : "");
}

inline AttentionParams config_of(const AttentionCase& c, uint64_t seed = 1234, uint64_t offset = 0) {
  AttentionParams p;
  p.B = c.B, p.H = c.H, p.T = c.T, p.D = c.D;
  p.softmax_scale = 1.f / std::sqrt(static_cast<float>(c.D));
  p.causal = c.causal;
  p.dtype = c.dtype;
  p.dropout = make_dropout_params(PhiloxState{seed, offset}, c.dropout_p);
  p.block_size = c.block_size, p.window_blocks = c.window_blocks, p.global_blocks = c.global_blocks;
  return p;
}

// Inputs of one case: q, k, v, dout (B, T, H, D), values in the case's dtype.
struct AttentionInputs {
  std::vector<float> q, k, v, dout;
};
inline AttentionInputs make_inputs(const AttentionCase& c, uint32_t seed) {
  const size_t n = static_cast<size_t>(c.B) * c.T * c.H * c.D;
  // |q|, |k| up to 2 make the logits O(1..10): peaked softmax rows, the hard case for rounding.
  return {random_values(n, seed, 2.f, c.dtype), random_values(n, seed + 1, 2.f, c.dtype),
          random_values(n, seed + 2, 1.f, c.dtype), random_values(n, seed + 3, 1.f, c.dtype)};
}

// The float64 ground truth of a case.
struct Reference {
  std::vector<double> o, lse, dq, dk, dv;
};
inline Reference reference_of(const AttentionParams& cfg, const AttentionInputs& in) {
  const size_t n = in.q.size();
  Reference r{std::vector<double>(n), std::vector<double>(static_cast<size_t>(cfg.B) * cfg.H * cfg.T),
              std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  const auto q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), dout = to_double(in.dout);
  cpu::attention_reference_forward(cfg, q.data(), k.data(), v.data(), r.o.data(), r.lse.data());
  cpu::attention_reference_backward(cfg, q.data(), k.data(), v.data(), dout.data(), r.dq.data(),
                                    r.dk.data(), r.dv.data());
  return r;
}

// Outputs of one implementation, in float.
struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

}  // namespace ft::testing_attention
