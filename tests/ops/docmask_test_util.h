// Helpers of the document-mask tests: token rows with end-of-text tokens at chosen positions, and a
// brute-force float64 attention (forward and gradients) whose mask is built from the tokens
// themselves -- same document (count of eot tokens up to the position) and causal -- so it shares
// nothing with doc_start, attention_allowed or the tile kinds it checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace ft::testing_docmask {

constexpr int32_t kEot = 50256;

// (B, T) tokens: eot at the positions eots[b] of row b, other tokens (t * 7 + b) % 1000.
inline std::vector<int32_t> tokens_with_eots(int B, int T, const std::vector<std::vector<int>>& eots) {
  std::vector<int32_t> tok(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) tok[static_cast<size_t>(b) * T + t] = (t * 7 + b) % 1000;
  for (int b = 0; b < B && b < static_cast<int>(eots.size()); ++b)
    for (int t : eots[b]) tok[static_cast<size_t>(b) * T + t] = kEot;
  return tok;
}

// mask[(b * T + i) * T + j]: query i of row b sees key j.
inline std::vector<bool> brute_force_mask(const std::vector<int32_t>& tok, int B, int T) {
  std::vector<bool> mask(static_cast<size_t>(B) * T * T);
  for (int b = 0; b < B; ++b) {
    std::vector<int> seg(T);
    int count = 0;
    for (int t = 0; t < T; ++t) seg[t] = count += tok[static_cast<size_t>(b) * T + t] == kEot;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) mask[(static_cast<size_t>(b) * T + i) * T + j] = j <= i && seg[j] == seg[i];
  }
  return mask;
}

struct BruteForce {
  std::vector<double> o, lse, dq, dk, dv;  // (B, T, H, D); lse (B, H, T)
};

// Softmax attention under `mask`, q, k, v, dout (B, T, H, D) contiguous; no dropout.
inline BruteForce brute_force_attention(const std::vector<bool>& mask, int B, int T, int H, int D, double scale,
                                        const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, const std::vector<double>& dout) {
  const size_t n = static_cast<size_t>(B) * T * H * D;
  BruteForce r{std::vector<double>(n, 0.0), std::vector<double>(static_cast<size_t>(B) * H * T),
               std::vector<double>(n, 0.0), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  auto at = [&](int b, int t, int h, int d) { return ((static_cast<size_t>(b) * T + t) * H + h) * D + d; };
  std::vector<double> p(T), dp(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < T; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j < T; ++j) {
          p[j] = -INFINITY;
          if (!mask[(static_cast<size_t>(b) * T + i) * T + j]) continue;
          double s = 0;
          for (int d = 0; d < D; ++d) s += q[at(b, i, h, d)] * k[at(b, j, h, d)];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        double l = 0;
        for (int j = 0; j < T; ++j) l += std::exp(p[j] - mx);  // every row sees itself: mx is finite
        r.lse[(static_cast<size_t>(b) * H + h) * T + i] = mx + std::log(l);
        double row_dot = 0;
        for (int j = 0; j < T; ++j) {
          p[j] = std::exp(p[j] - mx) / l;
          dp[j] = 0;
          for (int d = 0; d < D; ++d) {
            r.o[at(b, i, h, d)] += p[j] * v[at(b, j, h, d)];
            dp[j] += dout[at(b, i, h, d)] * v[at(b, j, h, d)];
          }
          row_dot += p[j] * dp[j];
        }
        for (int j = 0; j < T; ++j) {
          const double ds = p[j] * (dp[j] - row_dot) * scale;
          for (int d = 0; d < D; ++d) {
            r.dv[at(b, j, h, d)] += p[j] * dout[at(b, i, h, d)];
            r.dq[at(b, i, h, d)] += ds * k[at(b, j, h, d)];
            r.dk[at(b, j, h, d)] += ds * q[at(b, i, h, d)];
          }
        }
      }
  return r;
}

}  // namespace ft::testing_docmask
