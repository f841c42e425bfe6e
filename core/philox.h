// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
//
// Counter-based: the output is a pure function of (counter, key), so any thread can draw the bits
// of any element without a sequential state. The same header compiles for host and device, which
// is what makes CPU and CUDA draw identical bits (tests/core/philox_test checks the published
// known-answer vectors on the CPU and CPU == CUDA on a GPU).
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace ft {

struct PhiloxBits {
  uint32_t v[4];
};

namespace philox_detail {
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kW1 = 0xBB67AE85u;  // sqrt(3) - 1

FT_HOST_DEVICE void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
#if defined(__CUDA_ARCH__)
  // One IMAD.WIDE.U32. From the 64-bit C++ product nvcc 13 also emits an add of a zero high-part
  // term after each one (SASS of the flash kernels: 6 instructions per round instead of 4).
  asm("{\n\t.reg .b64 t;\n\tmul.wide.u32 t, %2, %3;\n\tmov.b64 {%1, %0}, t;\n\t}"
      : "=r"(hi), "=r"(lo)
      : "r"(a), "r"(b));
#else
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
#endif
}
}  // namespace philox_detail

// The round keys of Philox4x32-10: round r uses (k0 + r W0, k1 + r W1). A kernel that draws many
// calls with one key takes them precomputed on the host (DropoutParams::keys), so each round's xor
// reads its key as a constant operand: scheduled in the kernel, the flash forward recomputed the
// twenty sums every tile (twenty uniform adds in its SASS), for want of registers to keep them.
struct PhiloxKeys {
  uint32_t k0[10];
  uint32_t k1[10];
};
FT_HOST_DEVICE PhiloxKeys philox_keys(uint32_t k0, uint32_t k1) {
  PhiloxKeys keys{};
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    keys.k0[round] = k0 + static_cast<uint32_t>(round) * philox_detail::kW0;
    keys.k1[round] = k1 + static_cast<uint32_t>(round) * philox_detail::kW1;
  }
  return keys;
}

// Ten rounds of Philox4x32 on `counter` with precomputed round keys.
FT_HOST_DEVICE PhiloxBits philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        const PhiloxKeys& keys) {
  using namespace philox_detail;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c0, hi0, lo0);
    mulhilo(kM1, c2, hi1, lo1);
    const uint32_t n0 = hi1 ^ c1 ^ keys.k0[round];
    const uint32_t n2 = hi0 ^ c3 ^ keys.k1[round];
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return PhiloxBits{{c0, c1, c2, c3}};
}

// Ten rounds of Philox4x32 on `counter` with the 64-bit key (k0, k1).
FT_HOST_DEVICE PhiloxBits philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  return philox4x32_10(c0, c1, c2, c3, philox_keys(k0, k1));
}

// A position in the random stream: the key (seed) and where along the counter space to start.
// Stochastic ops take one explicitly; a Generator hands them out and advances `offset` by what
// each op consumes, so a replay with the same state draws the same bits.
//
// offset_base (CUDA graphs, compile_model): when set, a device pointer to a uint64 that CUDA kernels
// add to `offset` when they run. A captured graph bakes kernel arguments in, so the trainer keeps
// the generator's running offset in that word and rewrites it before each replay; the masks then
// advance from replay to replay exactly as in eager mode. CPU code ignores it (it is null there).
struct PhiloxState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const uint64_t* offset_base = nullptr;
};

}  // namespace ft
