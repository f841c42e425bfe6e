// Flash attention launchers (kernel-level API: POD params and a stream, no Tensor).
//
// flash_attention_forward writes p.o and p.lse from p.q, p.k, p.v.
// flash_attention_backward reads q, k, v, o, lse, dout and writes dq, dk, dv; it needs workspaces
// from the caller (sizes: flash_attention_backward_workspace; which ones: flash_backward_needs):
// p.dsum always; p.dq_accum except for the ordered deterministic backward without dropout (but for
// the warp-specialised one's); mode.dq_semaphore for the ordered one with dropout, and for the
// warp-specialised one's. dk and dv are always deterministic. dQ is a
// sum over key blocks: by default added with fp32 atomics in whatever order the CTAs get there
// (reproducible only to rounding), except where a deterministic form is the faster one
// (flash_backward_deterministic). mode.deterministic makes dq bit-identical run to run, in one of
// three ways (flash_stored_ds_dq and flash_fixed_point_dq say which a call takes):
//   stored dS (sm_90a, D = 64 and 128, where the warp-specialised backward runs): the backward
//     writes dS into the dq_accum workspace instead of adding dQ, and a second kernel sums each dQ
//     row's key blocks in order (flash_ds_store.cuh; cuDNN's way). Workspace: a 16 KiB tile per
//     (64 queries, 128 keys) pair, about half of them when causal.
//   fixed point: the atomic backward's kernels add 64-bit fixed-point integers (2^-40 units;
//     flash_dq_accum.cuh), whose sum does not depend on the order. Range: a key block's
//     contribution to one dQ element, before the softmax scale, must stay below 2^23 / (key
//     blocks); beyond it that head's dq comes out NaN rather than wrong.
//   ordered: without dropout a separate dQ kernel sums each row's key tiles in order in registers;
//     with dropout every (query tile, warp) waits on a counter so the key blocks add in one fixed
//     order (flash_launch.cuh). Where the warp-specialised backward runs (D = 64, 128), a counter per
//     query tile orders its fp32 bulk adds (FlashAttention-3's way, flash_bwd_ws_kernel.cuh); its dK
//     and dV then differ from the other forms' by rounding (its CTAs walk the query tiles downwards).
// The integer adds cost 12-30% of the backward against fp32 atomics (H100, session 13;
// bench/attention/NOTES.md): mostly less than the counters with dropout, mostly more than the
// separate dQ kernel without it. kAuto takes the faster form per call: the stored dS at D = 128 up to
// its 1 GiB workspace and the warp-specialised backward's ordered dQ beyond it and at D = 64 where
// that backward runs (at D = 64 2-13% slower than atomic dQ's, 1-6% faster than the fixed point's;
// H200, session 28; at D = 128, T = 16384 15-16% faster than the fixed point, session 33), the fixed
// point or the older ordered forms elsewhere.
// Supported: bf16 / f16, D in {64, 128, 256}, T >= 1, strides multiples of 8 elements, 16-byte aligned
// pointers (the ops front door validates; the launchers throw ft::Error on other head dims).
// Dropout with p.dropout.offset_base set: the kernels add *offset_base to the offset at their start
// (graph replay, core/dropout_mask.h).
#pragma once

#include <cstdint>

#include "core/stream.h"
#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_dq_accum.cuh"
#include "ops/cuda/attention/flash_ds_store.cuh"

namespace ft::cuda {

struct FlashBackwardMode {
  bool deterministic = false;
  int* dq_semaphore = nullptr;  // ordered deterministic with dropout: dq_semaphore_ints ints (zeroed by the launch)
};

// How the deterministic backward fixes dQ's bits (above), process-wide: the environment variable
// FLASHTRAIN_DETERMINISTIC_DQ=auto|fixed|ordered|stored_ds when set (read once; benchmarks), else
// kAuto; set_flash_deterministic_dq overrides both (tests run each form). kStoredDs where the stored
// dS is not built (flash_stored_ds_dq false) is kAuto.
enum class FlashDeterministicDq { kAuto, kFixedPoint, kOrdered, kStoredDs };
FlashDeterministicDq flash_deterministic_dq();
void set_flash_deterministic_dq(FlashDeterministicDq how);
// set_flash_deterministic_dq for a scope: the form in force before comes back at its end, also when
// the scope is left by an exception (tests, the benchmark's variants).
class ScopedFlashDeterministicDq {
 public:
  explicit ScopedFlashDeterministicDq(FlashDeterministicDq how) : previous_(flash_deterministic_dq()) {
    set_flash_deterministic_dq(how);
  }
  ~ScopedFlashDeterministicDq() { set_flash_deterministic_dq(previous_); }
  ScopedFlashDeterministicDq(const ScopedFlashDeterministicDq&) = delete;
  ScopedFlashDeterministicDq& operator=(const ScopedFlashDeterministicDq&) = delete;

 private:
  FlashDeterministicDq previous_;
};
// Whether a deterministic backward of p takes the stored dS (the warp-specialised backward takes
// the call, and kStoredDs is set or kAuto picks it: D = 128 with a workspace up to 1 GiB, where it
// measured faster than the fixed point, flash_attention.cu).
bool flash_stored_ds_dq(const AttentionParams& p);
// Whether a deterministic backward of p takes the fixed-point dQ (kAuto: where it measured faster,
// flash_attention.cu: from T = 4096 on at every D, below it with dropout at D <= 128; never where the
// warp-specialised backward's ordered dQ runs).
bool flash_fixed_point_dq(const AttentionParams& p);
// Whether a deterministic backward of p takes the warp-specialised backward's ordered dQ: neither of
// the two above, and the warp-specialised backward runs the call and has the form at p.D.
bool flash_ws_ordered_dq(const AttentionParams& p);
// Whether a backward of p runs a deterministic form: always when asked; and, under kAuto, also a call
// that did not ask where kAuto's deterministic form measured faster than the atomic dQ (D = 128: the
// stored dS where it fits, at any p, and the ordered dQ beyond it with dropout; D = 64: the ordered dQ
// with dropout up to T = 2048; flash_attention.cu). Such a call's dq is then bit-identical too, and
// it needs that form's workspace (flash_backward_needs asks this first).
bool flash_backward_deterministic(const AttentionParams& p, bool asked);

void flash_attention_forward(const AttentionParams& p, Stream stream);
void flash_attention_backward(const AttentionParams& p, Stream stream, const FlashBackwardMode& mode = {});

// Hopper's warpgroup MMAs (wgmma): the D = 64 and 128 forwards use them when the build has sm_90a code
// (CMAKE_CUDA_ARCHITECTURES lists 90a; FT_FLASH_WGMMA) and the current GPU is compute capability
// 9.0; otherwise it takes the mma.sync kernels. flash_wgmma_enabled says which one this device
// gets; set_flash_wgmma_allowed(false) forces mma.sync (tests compare both; process-wide).
bool flash_wgmma_enabled();
void set_flash_wgmma_allowed(bool allowed);
// Whether the build has sm_90a code (FT_FLASH_WGMMA) and the current GPU is compute capability 9.0:
// what every wgmma kernel needs (the FP8 forward has no fallback, so it asks this directly).
bool flash_sm90a_device();

// The D = 64 and 128 wgmma forwards take a one-warpgroup tile (64 query rows; D = 64: 3-4 CTAs per
// SM, D = 128: 2) up to this T (it depends on dropout), the two-warpgroup tile (128 rows sharing
// each K/V tile; D = 64: 2 CTAs per SM, D = 128: 1) above it (flash_launch.cuh). set_flash_fwd_small_tile_max_t overrides it process-wide (tests run every case through
// both; -1 restores the defaults).
int flash_fwd_small_tile_max_t(bool dropout);
void set_flash_fwd_small_tile_max_t(int T);

// The D = 64 and 128 backwards with atomic or fixed-point dQ take the wide-tile kernel
// (flash_bwd_wide_kernel.cuh, FlashConfig<D>::BwdWide) from this T on (it depends on the head dim
// and dropout: D = 64 T >= 2048, 4096 with dropout; D = 128 T >= 4096, 2048 with dropout); below it
// the 4-warp kernel (flash_bwd_kernel.cuh). set_flash_bwd_wide_min_t overrides it process-wide for
// both head dims (tests run every case through both kernels; -1 restores the defaults).
int flash_bwd_wide_min_t(int head_dim, bool dropout);
void set_flash_bwd_wide_min_t(int T);

// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh: FlashAttention-3's structure, TMA,
// mbarriers, wgmma, bulk dQ adds) takes the calls it covers -- D = 64 and 128, atomic or fixed-point
// dQ, without a document mask, on sm_90a -- from this T on. Default: 1024 (measured: flash_attention.cu),
// or FLASHTRAIN_FLASH_BWD_WS_MIN_T (read once); set_flash_bwd_ws_min_t overrides both process-wide
// (tests, the benchmark's variants 42-45; INT_MAX: never; -1 restores the default).
int flash_bwd_ws_min_t();
void set_flash_bwd_ws_min_t(int T);

// The warp-specialised Hopper forward (flash_fwd_ws_kernel.cuh: FlashAttention-3's structure, a TMA
// producer, two or three wgmma consumers) takes the calls it covers -- D = 64 and 128 without dropout or a
// document mask, on sm_90a -- from this T on. Default (measured: flash_attention.cu): 1024 at
// D = 128, 2048 at D = 64 (the wgmma forward is faster below); FLASHTRAIN_FLASH_FWD_WS_MIN_T
// (read once) sets it at both head dims; set_flash_fwd_ws_min_t overrides both process-wide (tests,
// the benchmark's variants 46-58; -1 restores the defaults).
int flash_fwd_ws_min_t(int head_dim);
void set_flash_fwd_ws_min_t(int T);
// Whether that forward runs persistent at sequence length T (FlashFwdWsTraits's kPersistent: one CTA
// per SM taking query blocks from a counter). By default it does where T, halved when causal, is at
// most 4096 (measured: flash_attention.cu); FLASHTRAIN_FLASH_FWD_WS_PERSISTENT_MAX_KEYS (read once)
// moves that 4096, 0 turning it off. The tests' cap on its grid: 0 one CTA per SM, n > 0 at most n
// CTAs, so that each walks many blocks. The setters override process-wide: persistent 1 on, 0 off,
// -1 the default.
bool flash_fwd_ws_persistent(int T, bool causal);
void set_flash_fwd_ws_persistent(int on);
int flash_fwd_ws_persistent_ctas_cap();
void set_flash_fwd_ws_persistent_ctas_cap(int n);

// dq_accum: (B, H, flash::dq_accum_rows(T), D) fp32 in the layout of flash_dq_accum.cuh. The
// deterministic mode's counters: one per (batch * head, 32-query tile, warp of the 4-warp backward
// CTA); the backward's tile shape is static_asserted against these in flash_launch.cuh.
constexpr int kFlashDqTileRows = 32;
constexpr int kFlashDqSemaphoresPerTile = 4;

struct FlashBackwardWorkspace {
  int64_t dsum_floats;        // (B, H, T)
  // (B, H, ceil(T / 128) * 128, D) fp32, or as many int64 plus a flag per (b, h) (fixed point):
  // the larger of the two (flash_dq_accum.cuh). The persistent warp-specialised backward with fp32
  // atomic dQ keeps its work counter just past the fp32 part (flash_bwd_ws.cu), so allocate all of it.
  int64_t dq_accum_floats;
  int64_t dq_semaphore_ints;  // (B, H, ceil(T / 32), 4)
  int64_t ds_floats;          // the stored dS in dq_accum's place (flash_ds_store.cuh)
};
// Which of the workspaces a backward call asked for in this mode uses (stored_ds: dq_accum holds
// ds_floats).
struct FlashBackwardNeeds {
  bool dq_accum, dq_semaphore, stored_ds = false;
};
inline FlashBackwardNeeds flash_backward_needs(const AttentionParams& p, bool asked_deterministic) {
  const bool deterministic = flash_backward_deterministic(p, asked_deterministic);
  const bool dropout = p.dropout.threshold != 0;
  if (deterministic && flash_stored_ds_dq(p)) return {true, false, true};
  if (deterministic && flash_fixed_point_dq(p)) return {true, false};
  if (deterministic && flash_ws_ordered_dq(p)) return {true, true};
  return {!deterministic || dropout, deterministic && dropout};
}

inline FlashBackwardWorkspace flash_attention_backward_workspace(const AttentionParams& p) {
  const int64_t bh = static_cast<int64_t>(p.B) * p.H;
  const int64_t tiles = (p.T + kFlashDqTileRows - 1) / kFlashDqTileRows;
  return {bh * p.T, flash::dq_fixed_float_count(bh, p.T, p.D), bh * tiles * kFlashDqSemaphoresPerTile,
          flash::ds_store_float_count(bh, p.T, p.causal)};
}

}  // namespace ft::cuda
