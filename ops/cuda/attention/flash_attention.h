// Flash attention launchers (kernel-level API: POD params and a stream, no Tensor).
//
// flash_attention_forward writes p.o and p.lse from p.q, p.k, p.v.
// flash_attention_backward reads q, k, v, o, lse, dout and writes dq, dk, dv; it needs two fp32
// workspaces from the caller: p.dsum (B*H*T floats) and p.dq_accum (B*H*T*D floats), see
// flash_attention_backward_workspace_floats. dQ is accumulated with fp32 atomics, so dq is
// reproducible only to rounding; dk and dv are deterministic.
// Supported: bf16 / f16, D in {64, 128}, T >= 1, strides multiples of 8 elements, 16-byte aligned
// pointers (the ops front door validates; the launchers throw ft::Error on other head dims).
#pragma once

#include <cstdint>

#include "core/stream.h"
#include "ops/attention_params.h"

namespace ft::cuda {

void flash_attention_forward(const AttentionParams& p, Stream stream);
void flash_attention_backward(const AttentionParams& p, Stream stream);

struct FlashBackwardWorkspace {
  int64_t dsum_floats;      // (B, H, T)
  int64_t dq_accum_floats;  // (B, H, T, D)
};
inline FlashBackwardWorkspace flash_attention_backward_workspace_floats(const AttentionParams& p) {
  const int64_t rows = static_cast<int64_t>(p.B) * p.H * p.T;
  return {rows, rows * p.D};
}

}  // namespace ft::cuda
