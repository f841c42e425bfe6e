// CPU attention references; see attention_reference.h. Written for clarity, parallel over heads.
#include "ops/cpu/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

#include "core/half.h"

namespace ft::cpu {
namespace {

struct Index {  // element (b, t, h, d) of a contiguous (B, T, H, D) array
  int T, H, D;
  int64_t operator()(int b, int t, int h, int d) const {
    return ((static_cast<int64_t>(b) * T + t) * H + h) * D + d;
  }
};

// Dropout factor Z of element (row, col) of head (b, h): 0 or keep_scale, 1 without dropout.
template <class Real>
Real dropout_factor(const AttentionParams& cfg, int b, int h, int row, int col) {
  if (cfg.dropout.threshold == 0) return Real(1);
  const uint64_t slice = static_cast<uint64_t>(b) * cfg.H + h;
  return dropout_keep_at(cfg.dropout, slice, row, col) ? Real(cfg.dropout.keep_scale) : Real(0);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// Where a backward writes dK and dV. The per-query-head code writes them at query head h of a
// (B, T, H, D) array (each head owned by one thread); with grouped K/V heads that array is scratch
// and finish() sums each group's H / H_kv partials in head order into the caller's (B, T, H_kv, D)
// dk, dv -- in Real, rounded once by rnd, as the CUDA reduction does (ops/cuda/attention_kv_sum.h).
// Without groups the code writes the caller's arrays directly and finish() does nothing.
template <class Real>
class KvGradients {
 public:
  KvGradients(const AttentionParams& cfg, Real* dk, Real* dv) : cfg_(cfg), dk_(dk), dv_(dv) {
    if (attention_group_size(cfg) == 1) return;
    const size_t n = static_cast<size_t>(cfg.B) * cfg.T * cfg.H * cfg.D;
    dk_partial_.assign(n, Real(0));
    dv_partial_.assign(n, Real(0));
  }
  Real* dk() { return dk_partial_.empty() ? dk_ : dk_partial_.data(); }  // (B, T, H, D)
  Real* dv() { return dv_partial_.empty() ? dv_ : dv_partial_.data(); }  // (B, T, H, D)
  template <class Round>
  void finish(Round rnd) {
    if (dk_partial_.empty()) return;
    sum_groups(dk_partial_.data(), dk_, rnd);
    sum_groups(dv_partial_.data(), dv_, rnd);
  }

 private:
  template <class Round>
  void sum_groups(const Real* partial, Real* out, Round rnd) const {
    const int H = cfg_.H, H_kv = attention_kv_heads(cfg_), group = H / H_kv, D = cfg_.D;
    const Index q_at{cfg_.T, H, D}, kv_at{cfg_.T, H_kv, D};
    for (int b = 0; b < cfg_.B; ++b)
      for (int t = 0; t < cfg_.T; ++t)
        for (int hk = 0; hk < H_kv; ++hk)
          for (int d = 0; d < D; ++d) {
            Real sum = 0;
            for (int g = 0; g < group; ++g) sum += partial[q_at(b, t, hk * group + g, d)];
            out[kv_at(b, t, hk, d)] = rnd(sum);
          }
  }
  const AttentionParams& cfg_;
  Real *dk_, *dv_;
  std::vector<Real> dk_partial_, dv_partial_;
};

}  // namespace

void for_each_head(const AttentionParams& cfg, const std::function<void(int, int)>& fn) {
  const int heads = cfg.B * cfg.H;
  const int workers = std::max(1, std::min<int>(heads, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (int bh = w; bh < heads; bh += workers) fn(bh / cfg.H, bh % cfg.H);
    });
  for (auto& t : pool) t.join();
}

float round_to_dtype(AttentionDType dtype, float x) {
  switch (dtype) {
    case AttentionDType::kBF16: return bf16_to_float(float_to_bf16(x));
    case AttentionDType::kF16: return f16_to_float(float_to_f16(x));
    case AttentionDType::kF32: return x;  // already a float: nothing to round
  }
  return x;
}

// ---------------------------------------------------------------- float64 naive

void attention_reference_forward(const AttentionParams& cfg, const double* q, const double* k,
                                 const double* v, double* o, double* lse) {
  const int T = cfg.T, D = cfg.D;
  const Index at{T, cfg.H, D}, kv_at{T, attention_kv_heads(cfg), D};
  for_each_head(cfg, [&](int b, int h) {
    const int hk = attention_kv_head(cfg, h);
    std::vector<double> s(T);
    for (int i = 0; i < T; ++i) {
      double m = -kInf;
      for (int j = 0; j < T; ++j) {
        s[j] = -kInf;
        if (!attention_allowed(cfg, b, i, j)) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += q[at(b, i, h, d)] * k[kv_at(b, j, hk, d)];
        s[j] = dot * cfg.softmax_scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (int j = 0; j < T; ++j) l += m == -kInf ? 0.0 : std::exp(s[j] - m);
      lse[(static_cast<int64_t>(b) * cfg.H + h) * T + i] = l > 0 ? m + std::log(l) : -kInf;
      for (int d = 0; d < D; ++d) o[at(b, i, h, d)] = 0;
      if (l == 0) continue;
      for (int j = 0; j < T; ++j) {
        const double pz = std::exp(s[j] - m) / l * dropout_factor<double>(cfg, b, h, i, j);
        if (pz == 0) continue;
        for (int d = 0; d < D; ++d) o[at(b, i, h, d)] += pz * v[kv_at(b, j, hk, d)];
      }
    }
  });
}

void attention_reference_backward(const AttentionParams& cfg, const double* q, const double* k,
                                  const double* v, const double* dout, double* dq, double* dk_out,
                                  double* dv_out) {
  const int T = cfg.T, D = cfg.D;
  const Index at{T, cfg.H, D}, kv_at{T, attention_kv_heads(cfg), D};
  KvGradients<double> kv(cfg, dk_out, dv_out);
  double *dk = kv.dk(), *dv = kv.dv();  // (B, T, H, D): this query head's share
  for_each_head(cfg, [&](int b, int h) {
    const int hk = attention_kv_head(cfg, h);
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d) dq[at(b, t, h, d)] = dk[at(b, t, h, d)] = dv[at(b, t, h, d)] = 0;
    std::vector<double> p(T), ds(T);
    for (int i = 0; i < T; ++i) {
      double m = -kInf;
      for (int j = 0; j < T; ++j) {
        p[j] = -kInf;
        if (!attention_allowed(cfg, b, i, j)) continue;
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += q[at(b, i, h, d)] * k[kv_at(b, j, hk, d)];
        p[j] = dot * cfg.softmax_scale;
        m = std::max(m, p[j]);
      }
      if (m == -kInf) continue;  // no visible key: all gradients of this row are zero
      double l = 0;
      for (int j = 0; j < T; ++j) l += std::exp(p[j] - m);
      double row_dot = 0;
      for (int j = 0; j < T; ++j) {
        p[j] = std::exp(p[j] - m) / l;
        const double z = dropout_factor<double>(cfg, b, h, i, j);
        double dpz = 0;
        for (int d = 0; d < D; ++d) dpz += dout[at(b, i, h, d)] * v[kv_at(b, j, hk, d)];
        ds[j] = dpz * z;  // dP
        row_dot += p[j] * ds[j];
        for (int d = 0; d < D; ++d) dv[at(b, j, h, d)] += p[j] * z * dout[at(b, i, h, d)];
      }
      for (int j = 0; j < T; ++j) {
        const double g = p[j] * (ds[j] - row_dot) * cfg.softmax_scale;
        if (g == 0) continue;
        for (int d = 0; d < D; ++d) {
          dq[at(b, i, h, d)] += g * k[kv_at(b, j, hk, d)];
          dk[at(b, j, h, d)] += g * q[at(b, i, h, d)];
        }
      }
    }
  });
  kv.finish([](double x) { return x; });
}

// ---------------------------------------------------------------- naive, low precision

void naive_lowp_forward(const AttentionParams& cfg, const float* q, const float* k, const float* v,
                        float* o, float* lse) {
  const int T = cfg.T, D = cfg.D;
  const Index at{T, cfg.H, D}, kv_at{T, attention_kv_heads(cfg), D};
  auto rnd = [&](float x) { return round_to_dtype(cfg.dtype, x); };
  for_each_head(cfg, [&](int b, int h) {
    const int hk = attention_kv_head(cfg, h);
    std::vector<float> s(T), acc(D);
    for (int i = 0; i < T; ++i) {
      float m = -INFINITY;
      for (int j = 0; j < T; ++j) {
        float dot = 0;
        for (int d = 0; d < D; ++d) dot += q[at(b, i, h, d)] * k[kv_at(b, j, hk, d)];
        s[j] = attention_allowed(cfg, b, i, j) ? dot * cfg.softmax_scale : -INFINITY;
        m = std::max(m, s[j]);
      }
      float l = 0;
      for (int j = 0; j < T; ++j) l += m == -INFINITY ? 0.f : std::exp(s[j] - m);
      lse[(static_cast<int64_t>(b) * cfg.H + h) * T + i] = l > 0 ? m + std::log(l) : -INFINITY;
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int j = 0; j < T && l > 0; ++j) {
        const float pz = rnd(std::exp(s[j] - m) / l * dropout_factor<float>(cfg, b, h, i, j));
        for (int d = 0; d < D; ++d) acc[d] += pz * v[kv_at(b, j, hk, d)];
      }
      for (int d = 0; d < D; ++d) o[at(b, i, h, d)] = rnd(acc[d]);
    }
  });
}

void naive_lowp_backward(const AttentionParams& cfg, const float* q, const float* k,
                         const float* v, const float* dout, float* dq, float* dk_out, float* dv_out) {
  const int T = cfg.T, D = cfg.D;
  const Index at{T, cfg.H, D}, kv_at{T, attention_kv_heads(cfg), D};
  auto rnd = [&](float x) { return round_to_dtype(cfg.dtype, x); };
  KvGradients<float> kv(cfg, dk_out, dv_out);
  float *dk = kv.dk(), *dv = kv.dv();  // (B, T, H, D): rounded per-query-head partials
  for_each_head(cfg, [&](int b, int h) {
    const int hk = attention_kv_head(cfg, h);
    std::vector<float> aq(static_cast<size_t>(T) * D, 0.f), ak(aq), av(aq);
    std::vector<float> p(T), dp(T);
    for (int i = 0; i < T; ++i) {
      float m = -INFINITY;
      for (int j = 0; j < T; ++j) {
        float dot = 0;
        for (int d = 0; d < D; ++d) dot += q[at(b, i, h, d)] * k[kv_at(b, j, hk, d)];
        p[j] = attention_allowed(cfg, b, i, j) ? dot * cfg.softmax_scale : -INFINITY;
        m = std::max(m, p[j]);
      }
      if (m == -INFINITY) continue;
      float l = 0;
      for (int j = 0; j < T; ++j) l += std::exp(p[j] - m);
      float row_dot = 0;
      for (int j = 0; j < T; ++j) {
        p[j] = rnd(std::exp(p[j] - m) / l);  // the saved P
        float dot = 0;
        for (int d = 0; d < D; ++d) dot += dout[at(b, i, h, d)] * v[kv_at(b, j, hk, d)];
        dp[j] = dot;
        row_dot += p[j] * dot * dropout_factor<float>(cfg, b, h, i, j);
      }
      for (int j = 0; j < T; ++j) {
        const float z = dropout_factor<float>(cfg, b, h, i, j);
        const float ds = rnd(p[j] * (dp[j] * z - row_dot));
        const float pz = rnd(p[j] * z);
        for (int d = 0; d < D; ++d) {
          av[static_cast<size_t>(j) * D + d] += pz * dout[at(b, i, h, d)];
          aq[static_cast<size_t>(i) * D + d] += ds * k[kv_at(b, j, hk, d)];
          ak[static_cast<size_t>(j) * D + d] += ds * q[at(b, i, h, d)];
        }
      }
    }
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < D; ++d) {
        dq[at(b, t, h, d)] = rnd(aq[static_cast<size_t>(t) * D + d] * cfg.softmax_scale);
        dk[at(b, t, h, d)] = rnd(ak[static_cast<size_t>(t) * D + d] * cfg.softmax_scale);
        dv[at(b, t, h, d)] = rnd(av[static_cast<size_t>(t) * D + d]);
      }
  });
  kv.finish(rnd);
}

// ---------------------------------------------------------------- the flash algorithm, tiled

void flash_tiled_forward(const AttentionParams& cfg, int block_m, int block_n, const float* q,
                         const float* k, const float* v, float* o, float* lse) {
  const int T = cfg.T, D = cfg.D;
  const Index at{T, cfg.H, D}, kv_at{T, attention_kv_heads(cfg), D};
  auto rnd = [&](float x) { return round_to_dtype(cfg.dtype, x); };
  const float kLog2e = 1.4426950408889634f;
  const float scale_log2 = cfg.softmax_scale * kLog2e;
  const float keep_scale = cfg.dropout.threshold ? cfg.dropout.keep_scale : 1.f;
  for_each_head(cfg, [&](int b, int h) {
    const int hk = attention_kv_head(cfg, h);
    const int n_blocks = (T + block_n - 1) / block_n;
    for (int m0 = 0; m0 < T; m0 += block_m) {
      const int m1 = std::min(m0 + block_m, T);
      const int rows = m1 - m0;
      std::vector<float> row_max(rows, -INFINITY), row_sum(rows, 0.f);
      std::vector<float> acc(static_cast<size_t>(rows) * D, 0.f), s(block_n);
      const int n_end = cfg.causal ? std::min(n_blocks, (m1 - 1) / block_n + 1) : n_blocks;
      for (int nb = 0; nb < n_end; ++nb) {
        const int n0 = nb * block_n, n1 = std::min(n0 + block_n, T);
        const int kind = attention_tile_kind(cfg, b, m0, m1, n0, n1);
        if (kind == kTileEmpty) continue;  // never loaded on the GPU
        for (int r = 0; r < rows; ++r) {
          const int i = m0 + r;
          float mx = row_max[r];
          for (int j = n0; j < n1; ++j) {
            float dot = 0;
            for (int d = 0; d < D; ++d) dot += q[at(b, i, h, d)] * k[kv_at(b, j, hk, d)];
            const bool masked = kind != kTileFull && !attention_allowed(cfg, b, i, j);
            s[j - n0] = masked ? -INFINITY : dot;
            mx = std::max(mx, s[j - n0]);
          }
          const float m_scaled = mx == -INFINITY ? 0.f : mx * scale_log2;
          const float alpha = std::exp2(row_max[r] * scale_log2 - m_scaled);
          row_max[r] = mx;
          row_sum[r] *= alpha;
          for (int d = 0; d < D; ++d) acc[static_cast<size_t>(r) * D + d] *= alpha;
          for (int j = n0; j < n1; ++j) {
            const float p = std::exp2(s[j - n0] * scale_log2 - m_scaled);
            row_sum[r] += p;
            const float pz = dropout_factor<float>(cfg, b, h, i, j) == 0.f ? 0.f : rnd(p);
            if (pz == 0.f) continue;
            for (int d = 0; d < D; ++d) acc[static_cast<size_t>(r) * D + d] += pz * v[kv_at(b, j, hk, d)];
          }
        }
      }
      for (int r = 0; r < rows; ++r) {
        const float l = row_sum[r];
        const float inv = l > 0 ? keep_scale / l : 0.f;
        for (int d = 0; d < D; ++d)
          o[at(b, m0 + r, h, d)] = rnd(acc[static_cast<size_t>(r) * D + d] * inv);
        lse[(static_cast<int64_t>(b) * cfg.H + h) * T + m0 + r] =
            l > 0 ? row_max[r] * cfg.softmax_scale + std::log(l) : -INFINITY;
      }
    }
  });
}

void flash_tiled_backward(const AttentionParams& cfg, int block_m, int block_n, const float* q,
                          const float* k, const float* v, const float* o, const float* lse,
                          const float* dout, float* dq, float* dk_out, float* dv_out) {
  const int T = cfg.T, D = cfg.D;
  const Index at{T, cfg.H, D}, kv_at{T, attention_kv_heads(cfg), D};
  auto rnd = [&](float x) { return round_to_dtype(cfg.dtype, x); };
  KvGradients<float> kv(cfg, dk_out, dv_out);
  float *dk = kv.dk(), *dv = kv.dv();  // (B, T, H, D): rounded per-query-head partials
  const float kLog2e = 1.4426950408889634f;
  const float scale_log2 = cfg.softmax_scale * kLog2e;
  for_each_head(cfg, [&](int b, int h) {
    const int hk = attention_kv_head(cfg, h);
    const float* lse_h = lse + (static_cast<int64_t>(b) * cfg.H + h) * T;
    std::vector<float> dsum(T, 0.f);  // the preprocess: D = rowsum(dO o O)
    for (int i = 0; i < T; ++i)
      for (int d = 0; d < D; ++d) dsum[i] += dout[at(b, i, h, d)] * o[at(b, i, h, d)];
    std::vector<float> aq(static_cast<size_t>(T) * D, 0.f);
    const int m_blocks = (T + block_m - 1) / block_m;
    for (int n0 = 0; n0 < T; n0 += block_n) {
      const int n1 = std::min(n0 + block_n, T);
      std::vector<float> ak(static_cast<size_t>(n1 - n0) * D, 0.f), av(ak);
      for (int mb = cfg.causal ? n0 / block_m : 0; mb < m_blocks; ++mb) {
        const int m0 = mb * block_m, m1 = std::min(m0 + block_m, T);
        const int kind = attention_tile_kind(cfg, b, m0, m1, n0, n1);
        if (kind == kTileEmpty) continue;
        for (int i = m0; i < m1; ++i) {
          const float lse_log2 = lse_h[i] == -INFINITY ? INFINITY : lse_h[i] * kLog2e;
          for (int j = n0; j < n1; ++j) {
            float s = 0, dpz = 0;
            for (int d = 0; d < D; ++d) {
              s += q[at(b, i, h, d)] * k[kv_at(b, j, hk, d)];
              dpz += dout[at(b, i, h, d)] * v[kv_at(b, j, hk, d)];
            }
            float p = std::exp2(s * scale_log2 - lse_log2);
            if (kind != kTileFull && !attention_allowed(cfg, b, i, j)) p = 0.f;
            const float z = dropout_factor<float>(cfg, b, h, i, j);
            const float pz = rnd(p * z);
            const float ds = rnd(p * (dpz * z - dsum[i]));
            for (int d = 0; d < D; ++d) {
              av[static_cast<size_t>(j - n0) * D + d] += pz * dout[at(b, i, h, d)];
              ak[static_cast<size_t>(j - n0) * D + d] += ds * q[at(b, i, h, d)];
              aq[static_cast<size_t>(i) * D + d] += ds * k[kv_at(b, j, hk, d)];
            }
          }
        }
      }
      for (int j = n0; j < n1; ++j)
        for (int d = 0; d < D; ++d) {
          dk[at(b, j, h, d)] = rnd(ak[static_cast<size_t>(j - n0) * D + d] * cfg.softmax_scale);
          dv[at(b, j, h, d)] = rnd(av[static_cast<size_t>(j - n0) * D + d]);
        }
    }
    for (int i = 0; i < T; ++i)
      for (int d = 0; d < D; ++d)
        dq[at(b, i, h, d)] = rnd(aq[static_cast<size_t>(i) * D + d] * cfg.softmax_scale);
  });
  kv.finish(rnd);
}

}  // namespace ft::cpu
