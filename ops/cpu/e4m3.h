// Software e4m3 (FP8 "e4m3fn": 1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities,
// S.1111.111 is NaN, largest finite 448), converted exactly as the GPU's
// cvt.rn.satfinite.e4m3x2.f32: round to nearest even, finite values beyond 448 saturate to +-448,
// subnormals (exponent field 0: m * 2^-9) kept. The FP8 attention's CPU emulation and its tests use
// these; the CUDA kernels use the hardware conversion.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ft::cpu {

inline float e4m3_to_float(uint8_t b) {
  if ((b & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  const int e = (b >> 3) & 15, m = b & 7;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}

inline uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7E;  // satfinite; [448, 464) rounds to 448 anyway
  int e2 = 0;
  std::frexp(a, &e2);                          // a in [2^(e2-1), 2^e2)
  const int exponent = std::max(e2 - 1, -6);   // subnormals share the 2^-6 binade's quantum
  const double quantum = std::ldexp(1.0, exponent - 3);
  const double r = std::nearbyint(a / quantum) * quantum;  // exact division; ties to even
  if (r == 0) return sign;
  std::frexp(r, &e2);
  const int er = e2 - 1;  // the rounded value may have moved up one binade
  if (er < -6) return sign | static_cast<uint8_t>(r / std::ldexp(1.0, -9));
  const int mantissa = static_cast<int>(r / std::ldexp(1.0, er - 3)) - 8;
  return sign | static_cast<uint8_t>(((er + 7) << 3) | mantissa);
}

inline float round_to_e4m3(float x) { return e4m3_to_float(float_to_e4m3(x)); }

}  // namespace ft::cpu
