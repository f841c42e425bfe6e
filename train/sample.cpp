#include "train/sample.h"

#include <algorithm>
#include <cmath>

#include "autograd/variable.h"
#include "core/philox.h"

namespace ft {

namespace {

// 53 random bits from one Philox call -> a double in [0, 1).
double uniform(uint64_t seed, uint64_t counter) {
  const PhiloxBits b = philox4x32_10(static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0,
                                     static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(b.v[0]) << 21) ^ (b.v[1] >> 11);
  return static_cast<double>(bits) * 0x1.0p-53;
}

}  // namespace

int32_t pick_token(std::vector<float> logits, double temperature, int64_t top_k, double u) {
  FT_CHECK_ARG(!logits.empty(), "[sample] empty logits");
  const auto argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (temperature <= 0) return argmax;
  const auto V = static_cast<int64_t>(logits.size());
  float threshold = -INFINITY;
  if (top_k > 0 && top_k < V) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
    threshold = sorted[static_cast<size_t>(top_k - 1)];
  }
  const double top = logits[static_cast<size_t>(argmax)];
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] < threshold) continue;
    p[i] = std::exp((logits[i] - top) / temperature);  // max subtracted: no overflow
    total += p[i];
  }
  double target = u * total, acc = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    acc += p[i];
    if (p[i] > 0 && acc > target) return static_cast<int32_t>(i);
  }
  return argmax;  // rounding left u * total at the very end
}

std::vector<int32_t> sample_tokens(nn::GPT& model, const std::vector<int32_t>& prompt, const SampleParams& params) {
  FT_CHECK_ARG(!prompt.empty(), "[sample] the prompt must hold at least one token");
  autograd::NoGradGuard no_grad;
  const int64_t Tmax = model.config().max_seq_len;
  const Device device = model.wte.weight.device();
  std::vector<int32_t> ids = prompt, generated;
  for (int64_t i = 0; i < params.max_new_tokens; ++i) {
    const auto T = std::min<int64_t>(static_cast<int64_t>(ids.size()), Tmax);
    const std::vector<int32_t> window(ids.end() - T, ids.end());
    const Tensor idx = Tensor::from_vector(window, {1, T}).to(device);  // (1, T)
    const Tensor logits = model.forward(idx).logits;                    // (1, T, V)
    const std::vector<float> last = logits.select(1, T - 1).to_floats();  // (V)
    const int32_t next = pick_token(last, params.temperature, params.top_k, uniform(params.seed, static_cast<uint64_t>(i)));
    ids.push_back(next);
    generated.push_back(next);
    if (next == params.stop_token) break;
  }
  return generated;
}

}  // namespace ft
