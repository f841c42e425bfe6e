// Host-side bf16 and f16 storage types with float conversion (round to nearest even).
//
// They are bit-compatible with CUDA's __nv_bfloat16 and __half, so a buffer written on one side
// is read on the other without conversion. CPU kernels compute in float and round on store,
// which is also what the CUDA kernels do.
#pragma once

#include <cstdint>
#include <cstring>

namespace ft {

struct bf16 {
  uint16_t bits = 0;
};
struct f16 {
  uint16_t bits = 0;
};

inline float bf16_to_float(bf16 h) {
  const uint32_t u = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) {  // NaN: keep it a quiet NaN
    return bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}

inline float f16_to_float(f16 h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1Fu;
  uint32_t man = h.bits & 0x3FFu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) {
        man <<= 1;
        --exp;
      }
      man &= 0x3FFu;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 0x1F) {
    u = sign | 0x7F800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline f16 float_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or NaN
    return f16{static_cast<uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u))};
  }
  if (abs >= 0x477FF000u) return f16{static_cast<uint16_t>(sign | 0x7C00u)};  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: shift with round to nearest even
    if (abs < 0x33000000u) return f16{sign};
    const uint32_t exp = abs >> 23;
    const uint32_t man = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 - (exp - 127) + 13 - 1 ... = bits dropped
    uint32_t half_man = man >> (shift);
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_man & 1u))) ++half_man;
    return f16{static_cast<uint16_t>(sign | half_man)};
  }
  uint32_t v = abs - 0x38000000u;  // rebias exponent 127 -> 15
  v += 0xFFFu + ((v >> 13) & 1u);  // round to nearest even
  return f16{static_cast<uint16_t>(sign | (v >> 13))};
}

}  // namespace ft
