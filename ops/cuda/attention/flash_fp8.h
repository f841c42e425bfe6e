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
void flash_fp8_forward(const Fp8AttentionParams& p, Stream stream);

}  // namespace ft::cuda
