// FP8 (e4m3) attention forward launchers (kernel-level API: POD params and a stream, no Tensor).
//
// fp8_quantize turns one bf16 (B, T, H, D) operand into tile images and scales
// (ops/attention_fp8_params.h); flash_fp8_forward computes O (bf16) from three quantised operands.
// Both need sm_90a code in the build and a compute capability 9.0 GPU (flash_sm90a_device(),
// flash_attention.h); D in {64, 128, 256}. The ops front door (ops/attention_fp8.h) validates; the
// launchers throw ft::Error on other head dims.
#pragma once

#include <cstdint>

#include "core/stream.h"
#include "ops/attention_fp8_params.h"

namespace ft::cuda {

// Sizes of one quantised operand: bytes (B * H * T_pad * D) and scales (one per tile).
struct Fp8QuantizedSizes {
  int64_t bytes, scales;
};
inline Fp8QuantizedSizes fp8_quantized_sizes(Fp8Operand operand, int B, int H, int T, int D) {
  const int64_t bh = static_cast<int64_t>(B) * H, T_pad = fp8_padded_rows(T);
  const int rows = operand == Fp8Operand::kQ ? kFp8QTileRows : kFp8KvTileRows;
  return {bh * T_pad * D, bh * (T_pad / rows)};
}

// Per-tensor mode (p.per_tensor) needs p.amax: one float of device memory, which this zeroes.
void fp8_quantize(const Fp8QuantParams& p, Stream stream);

// Schedules of the forward kernel (same arithmetic, same output up to fp32 summation order):
// kPlain = two warpgroups in lock-step (flash_fp8_fwd_kernel.cuh); kPipe = FlashAttention-3's
// intra-warpgroup overlap (flash_fp8_fwd_pipe_kernel.cuh); kWg1Occ4 = the plain kernel with one
// warpgroup per CTA and four CTAs per SM, so the CTAs' softmaxes run under each other's products,
// and each key tile's P V and row sums (on the tensor cores) in registers of their own, added into
// O and the row sums in fp32 (FlashFp8FwdTraits::kTileProducts); kWg1Occ3 = the same at D = 128
// with three CTAs per SM.
// kDefault takes the fastest for the head dim (fp8_fwd_default_variant). A variant that does not fit
// a head dim (registers or shared memory) runs as kPlain: fp8_fwd_variant_fits. Also measured on an
// H100 and dropped (bench/attention/NOTES.md, session 12; code in c300d97 and 938ba77): three and
// four warpgroups per CTA, two plain CTAs of two warpgroups, three CTAs of one at D = 64 (before the
// tile products), and pipe with two CTAs of one warpgroup.
enum class Fp8FwdVariant : int { kDefault = 0, kPlain, kPipe, kWg1Occ4, kWg1Occ3 };
constexpr bool fp8_fwd_variant_fits(Fp8FwdVariant v, int D) {
  switch (v) {
    // ptxas -v (sm_90a, CUDA 13.0): two S accumulators (128 registers) + O take 254 registers
    // already at D = 128.
    case Fp8FwdVariant::kPipe: return D <= 128;
    // 128 registers a thread: at D = 128 they spill 1 KB (S + O need 128 on their own).
    case Fp8FwdVariant::kWg1Occ4: return D == 64;
    // wg1occ4's kernel at D = 128 with three CTAs per SM: 164 registers of the 168 that allows, no
    // spill (ptxas -v, CUDA 13.0), and 3 x 74 KB of shared memory.
    case Fp8FwdVariant::kWg1Occ3: return D == 128;
    default: return true;
  }
}
// The fastest schedule per head dim on an H100 (sessions 12 and 25, T = 1024-4096, causal and
// not): wg1occ4 at D = 64, wg1occ3 at D = 128 (session 25: 6-13% under pipe; two CTAs of one
// warpgroup were slower than pipe at T = 4096), plain at D = 256 (the others do not fit).
constexpr Fp8FwdVariant fp8_fwd_default_variant(int D) {
  return D == 64 ? Fp8FwdVariant::kWg1Occ4 : D == 128 ? Fp8FwdVariant::kWg1Occ3 : Fp8FwdVariant::kPlain;
}
const char* fp8_fwd_variant_name(Fp8FwdVariant v);
// The variant named by the dev-only environment variable FLASHTRAIN_FP8_FWD_VARIANT (default,
// plain, pipe, wg1occ4, wg1occ3; read once; unset = default), for benchmarks; an unknown name throws.
Fp8FwdVariant fp8_fwd_variant_from_env();

void flash_fp8_forward(const Fp8AttentionParams& p, Stream stream);  // fp8_fwd_variant_from_env()
void flash_fp8_forward(const Fp8AttentionParams& p, Stream stream, Fp8FwdVariant variant);

}  // namespace ft::cuda
