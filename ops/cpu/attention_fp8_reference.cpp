// CPU emulation of the FP8 attention forward; see attention_fp8_reference.h.
#include "ops/cpu/attention_fp8_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/attention_reference.h"
#include "ops/cpu/e4m3.h"

namespace ft::cpu {
namespace {

int64_t bthd(int b, int t, int h, int d, int T, int H, int D) {
  return ((static_cast<int64_t>(b) * T + t) * H + h) * D + d;
}
int tile_rows(Fp8Operand operand) { return operand == Fp8Operand::kQ ? kFp8QTileRows : kFp8KvTileRows; }
int64_t tile_image_offset(Fp8Operand operand, int bh, int t, int d, int T_pad, int D) {
  switch (operand) {
    case Fp8Operand::kQ: return fp8_q_offset(bh, t, d, T_pad, D);
    case Fp8Operand::kK: return fp8_k_offset(bh, t, d, T_pad, D);
    case Fp8Operand::kV: return fp8_v_offset(bh, t, d, T_pad, D);
  }
  return 0;
}

}  // namespace

void fp8_hadamard_signs(uint64_t seed, int D, uint32_t (&sign_bits)[8]) {
  std::fill(sign_bits, sign_bits + 8, 0u);
  uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(D));
  for (int w = 0; w < 8; ++w) {  // splitmix64
    s += 0x9E3779B97F4A7C15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    sign_bits[w] = static_cast<uint32_t>(z);
  }
  for (int w = 0; w < 8; ++w)  // bits past D stay clear
    if (32 * w >= D) sign_bits[w] = 0;
    else if (32 * w + 32 > D) sign_bits[w] &= (1u << (D - 32 * w)) - 1u;
}

void fwht_inplace(float* x, int D) {
  for (int h = 1; h < D; h *= 2)
    for (int i = 0; i < D; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

void fp8_rotate_inplace(float* row, int D, const uint32_t* sign_bits) {
  for (int d = 0; d < D; ++d)
    if ((sign_bits[d / 32] >> (d % 32)) & 1u) row[d] = -row[d];
  fwht_inplace(row, D);
}

Fp8Quantized fp8_quantize(const float* x, int B, int T, int H, int D, Fp8Operand operand, bool per_tensor,
                          const uint32_t* sign_bits) {
  const int T_pad = fp8_padded_rows(T), R = tile_rows(operand), tiles = T_pad / R;
  const int heads = B * H;
  // The rotated (or plain) fp32 rows, in (bh, t_pad, D) order; padding rows stay zero.
  std::vector<float> rows(static_cast<size_t>(heads) * T_pad * D, 0.f);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < T; ++t) {
        float* row = &rows[(static_cast<size_t>(b * H + h) * T_pad + t) * D];
        for (int d = 0; d < D; ++d) row[d] = x[bthd(b, t, h, d, T, H, D)];
        if (sign_bits) fp8_rotate_inplace(row, D, sign_bits);
      }
  std::vector<float> amax(static_cast<size_t>(heads) * tiles, 0.f);
  for (size_t tile = 0; tile < amax.size(); ++tile)
    for (size_t i = tile * R * D; i < (tile + 1) * R * D; ++i) amax[tile] = std::max(amax[tile], std::fabs(rows[i]));
  if (per_tensor) {
    const float all = *std::max_element(amax.begin(), amax.end());
    std::fill(amax.begin(), amax.end(), all);
  }
  // The rotation's 1 / sqrt(D) goes into the scale (the bytes do not depend on it), in fp32 as on
  // the GPU.
  const float norm = sign_bits ? 1.f / std::sqrt(static_cast<float>(D)) : 1.f;
  Fp8Quantized out;
  out.bytes.assign(static_cast<size_t>(heads) * T_pad * D, 0);
  out.scales.resize(amax.size());
  for (int bh = 0; bh < heads; ++bh)
    for (int tile = 0; tile < tiles; ++tile) {
      const float a = amax[static_cast<size_t>(bh) * tiles + tile];
      const float inv = a > 0.f ? kE4m3Max / a : 1.f;
      out.scales[static_cast<size_t>(bh) * tiles + tile] = a > 0.f ? a / kE4m3Max * norm : 1.f;
      for (int r = 0; r < R; ++r) {
        const int t = tile * R + r;
        const float* row = &rows[(static_cast<size_t>(bh) * T_pad + t) * D];
        for (int d = 0; d < D; ++d)
          out.bytes[tile_image_offset(operand, bh, t, d, T_pad, D)] = float_to_e4m3(row[d] * inv);
      }
    }
  return out;
}

std::vector<double> fp8_dequantize(const Fp8Quantized& qt, int B, int T, int H, int D, Fp8Operand operand) {
  const int T_pad = fp8_padded_rows(T), R = tile_rows(operand), tiles = T_pad / R;
  std::vector<double> x(static_cast<size_t>(B) * T * H * D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int bh = b * H + h;
      for (int t = 0; t < T; ++t) {
        const double scale = qt.scales[static_cast<size_t>(bh) * tiles + t / R];
        for (int d = 0; d < D; ++d)
          x[bthd(b, t, h, d, T, H, D)] = e4m3_to_float(qt.bytes[tile_image_offset(operand, bh, t, d, T_pad, D)]) * scale;
      }
    }
  return x;
}

std::vector<double> fp8_round_trip(const float* x, int B, int T, int H, int D, Fp8Operand operand, bool per_tensor,
                                   const uint32_t* sign_bits) {
  return fp8_dequantize(fp8_quantize(x, B, T, H, D, operand, per_tensor, sign_bits), B, T, H, D, operand);
}

void fp8_attention_emulate(const AttentionParams& cfg, const double* q, const double* k, const double* v,
                           double* o) {
  const int T = cfg.T, H = cfg.H, D = cfg.D;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for_each_head(cfg, [&](int b, int h) {
    std::vector<double> s(kFp8KvTileRows), acc(D);
    for (int i = 0; i < T; ++i) {
      double m = -kInf, l = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int n0 = 0; n0 < T; n0 += kFp8KvTileRows) {
        const int n1 = std::min(n0 + kFp8KvTileRows, T);
        double tile_max = -kInf;
        for (int j = n0; j < n1; ++j) {
          s[j - n0] = -kInf;
          if (cfg.causal && j > i) continue;
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += q[bthd(b, i, h, d, T, H, D)] * k[bthd(b, j, h, d, T, H, D)];
          s[j - n0] = dot * cfg.softmax_scale;
          tile_max = std::max(tile_max, s[j - n0]);
        }
        const double m_new = std::max(m, tile_max);
        if (m_new == -kInf) continue;  // nothing visible yet
        const double alpha = std::exp(m - m_new);  // 0 when m = -inf
        l *= alpha;
        for (double& a : acc) a *= alpha;
        for (int j = n0; j < n1; ++j) {
          if (s[j - n0] == -kInf) continue;
          const double p = std::exp(s[j - n0] - m_new) * kFp8PScale;
          const double p8 = round_to_e4m3(static_cast<float>(p));
          l += p8;
          for (int d = 0; d < D; ++d) acc[d] += p8 * v[bthd(b, j, h, d, T, H, D)];
        }
        m = m_new;
      }
      for (int d = 0; d < D; ++d) o[bthd(b, i, h, d, T, H, D)] = l > 0 ? acc[d] / l : 0.0;
    }
  });
}

void fp8_attention_forward_emulated(const AttentionParams& cfg, const float* q, const float* k, const float* v,
                                    bool block_quant, bool hadamard, uint64_t hadamard_seed, double* o) {
  uint32_t signs[8];
  fp8_hadamard_signs(hadamard_seed, cfg.D, signs);
  const uint32_t* rot = hadamard ? signs : nullptr;
  const bool per_tensor = !block_quant;
  const auto qd = fp8_round_trip(q, cfg.B, cfg.T, cfg.H, cfg.D, Fp8Operand::kQ, per_tensor, rot);
  const auto kd = fp8_round_trip(k, cfg.B, cfg.T, cfg.H, cfg.D, Fp8Operand::kK, per_tensor, rot);
  const auto vd = fp8_round_trip(v, cfg.B, cfg.T, cfg.H, cfg.D, Fp8Operand::kV, per_tensor, nullptr);
  fp8_attention_emulate(cfg, qd.data(), kd.data(), vd.data(), o);
}

}  // namespace ft::cpu
