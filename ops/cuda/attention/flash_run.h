// Declarations of the per-head-dim launchers, defined in flash_launch.cuh and instantiated once each
// in flash_{fwd,bwd}_hdim{64,128,256}.cu, and of the warp-specialised backward and forward
// (flash_bwd_ws.cu, flash_fwd_ws.cu).
#pragma once

#include <cuda_runtime.h>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_attention.h"

namespace ft::cuda::flash {
template <int kHeadDim>
void run_flash_fwd(const AttentionParams& p, cudaStream_t stream);
template <int kHeadDim>
void run_flash_bwd(const AttentionParams& p, cudaStream_t stream, const FlashBackwardMode& mode);
// The warp-specialised Hopper backward (flash_bwd_ws.cu): whether its threshold and coverage (head
// dim, no document mask) admit the call; whether it has the fixed-point or the ordered dQ at a head
// dim (their staging fits in shared memory); whether it takes the call (the mode, the GPU and the
// strides too); and the call.
bool flash_bwd_ws_enabled_for(const AttentionParams& p);
// Whether it can run the call in some dQ form: enabled_for, and the GPU (sm_90a) and strides (TMA).
bool flash_bwd_ws_runs_here(const AttentionParams& p);
bool flash_bwd_ws_has_fixed_point_dq(int head_dim);
bool flash_bwd_ws_has_ordered_dq(int head_dim);
bool flash_bwd_ws_applies(const AttentionParams& p, const FlashBackwardMode& mode);
void run_flash_bwd_ws(const AttentionParams& p, cudaStream_t stream, const FlashBackwardMode& mode);
// The dev trace of its CTAs (flash_bwd_trace.cuh): the calls that follow write one record of 16
// uint64 per CTA to `records` (device memory, zeroed; null: stop). False, and nothing is set, in a
// build without -DFT_FLASH_BWD_TRACE.
bool set_flash_bwd_ws_trace(unsigned long long* records);
// The warp-specialised Hopper forward (flash_fwd_ws.cu): whether it takes the call (its threshold,
// coverage -- D = 64 and 128, no dropout, no document mask --, the GPU and the strides), and the call
// in a form: FlashFwdWsTraits's kOverlap (FlashAttention-3's intra-warpgroup overlap), kPingPong (its
// inter-warpgroup ping-pong), kStages (the K / V ring's depth, 2 or 3) and kConsumers (2, or 3 at
// D = 64 with 2 stages and no ping-pong). flash_fwd_ws_form: the form the dispatch takes at a head
// dim; the benchmark's variants 47-53, 57 and 58 take the others.
// persistent: FlashFwdWsTraits's kPersistent (one CTA per SM taking query blocks from a counter),
// built only for flash_fwd_ws_form's forms (and D = 128's ping-pong without the overlap).
struct FlashFwdWsForm {
  bool overlap = false;
  bool ping_pong = false;
  int stages = 2;
  int consumers = 2;
  bool persistent = false;
  // Launch order (without persistent): the blocks rank-major over every head (longest causal blocks
  // of all heads first) instead of FlashConfig's head groups.
  bool rank_major = false;
};
FlashFwdWsForm flash_fwd_ws_form(int head_dim, bool persistent);
bool flash_fwd_ws_applies(const AttentionParams& p);
void run_flash_fwd_ws(const AttentionParams& p, cudaStream_t stream, const FlashFwdWsForm& form);
}  // namespace ft::cuda::flash
