// Flash attention launchers (kernel-level API: POD params and a stream, no Tensor).
//
// flash_attention_forward writes p.o and p.lse from p.q, p.k, p.v.
// flash_attention_backward reads q, k, v, o, lse, dout and writes dq, dk, dv; it needs workspaces
// from the caller (sizes: flash_attention_backward_workspace): p.dsum always; p.dq_accum unless
// deterministic without dropout; mode.dq_semaphore only when deterministic with dropout
// (flash_backward_needs). dk and dv are always deterministic. dQ is a sum over key blocks: by
// default added with fp32 atomics in whatever order the CTAs get there (reproducible only to
// rounding). mode.deterministic makes dq bit-identical run to run: without dropout a separate dQ
// kernel sums each row's key tiles in order in registers; with dropout every (query tile, warp)
// waits on a counter so the key blocks add in one fixed order (flash_launch.cuh: why two designs).
// Supported: bf16 / f16, D in {64, 128, 256}, T >= 1, strides multiples of 8 elements, 16-byte aligned
// pointers (the ops front door validates; the launchers throw ft::Error on other head dims).
// Dropout with p.dropout.offset_base set: the kernels add *offset_base to the offset at their start
// (graph replay, core/dropout_mask.h).
#pragma once

#include <cstdint>

#include "core/stream.h"
#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_dq_accum.cuh"

namespace ft::cuda {

struct FlashBackwardMode {
  bool deterministic = false;
  int* dq_semaphore = nullptr;  // deterministic with dropout: dq_semaphore_ints ints (zeroed by the launch)
};

void flash_attention_forward(const AttentionParams& p, Stream stream);
void flash_attention_backward(const AttentionParams& p, Stream stream, const FlashBackwardMode& mode = {});

// Hopper's warpgroup MMAs (wgmma): the D = 64 forward uses them when the build has sm_90a code
// (CMAKE_CUDA_ARCHITECTURES lists 90a; FT_FLASH_WGMMA) and the current GPU is compute capability
// 9.0; otherwise it takes the mma.sync kernels. flash_wgmma_enabled says which one this device
// gets; set_flash_wgmma_allowed(false) forces mma.sync (tests compare both; process-wide).
bool flash_wgmma_enabled();
void set_flash_wgmma_allowed(bool allowed);
// Whether the build has sm_90a code (FT_FLASH_WGMMA) and the current GPU is compute capability 9.0:
// what every wgmma kernel needs (the FP8 forward has no fallback, so it asks this directly).
bool flash_sm90a_device();

// The D = 64 wgmma forward takes a one-warpgroup tile (64 query rows, 3 CTAs per SM) up to this T
// (it depends on dropout), the two-warpgroup tile (128 rows sharing each K/V tile, 2 CTAs per SM)
// above it. set_flash_fwd_small_tile_max_t overrides it process-wide (tests run every case through
// both; -1 restores the defaults).
int flash_fwd_small_tile_max_t(bool dropout);
void set_flash_fwd_small_tile_max_t(int T);

// The D = 64 backward without the deterministic mode takes the wide-tile kernel
// (flash_bwd_wide_kernel.cuh) from this T on (it depends on dropout); below it the 4-warp kernel
// (flash_bwd_kernel.cuh). set_flash_bwd_wide_min_t overrides it process-wide (tests run every
// case through both; -1 restores the defaults).
int flash_bwd_wide_min_t(bool dropout);
void set_flash_bwd_wide_min_t(int T);

// dq_accum: (B, H, flash::dq_accum_rows(T), D) fp32 in the layout of flash_dq_accum.cuh. The
// deterministic mode's counters: one per (batch * head, 32-query tile, warp of the 4-warp backward
// CTA); the backward's tile shape is static_asserted against these in flash_launch.cuh.
constexpr int kFlashDqTileRows = 32;
constexpr int kFlashDqSemaphoresPerTile = 4;

struct FlashBackwardWorkspace {
  int64_t dsum_floats;        // (B, H, T)
  int64_t dq_accum_floats;    // (B, H, ceil(T / 128) * 128, D)
  int64_t dq_semaphore_ints;  // (B, H, ceil(T / 32), 4)
};
// Which of the workspaces a backward call with this mode uses.
struct FlashBackwardNeeds {
  bool dq_accum, dq_semaphore;
};
inline FlashBackwardNeeds flash_backward_needs(const AttentionParams& p, bool deterministic) {
  const bool dropout = p.dropout.threshold != 0;
  return {!deterministic || dropout, deterministic && dropout};
}

inline FlashBackwardWorkspace flash_attention_backward_workspace(const AttentionParams& p) {
  const int64_t bh = static_cast<int64_t>(p.B) * p.H;
  const int64_t tiles = (p.T + kFlashDqTileRows - 1) / kFlashDqTileRows;
  return {bh * p.T, bh * flash::dq_accum_rows(p.T) * p.D, bh * tiles * kFlashDqSemaphoresPerTile};
}

}  // namespace ft::cuda
