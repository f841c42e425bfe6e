// Head-dim switch of the flash launchers; the kernels live in the per-head-dim TUs.
#include "ops/cuda/attention/flash_attention.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/cuda/check.h"
#include "core/error.h"
#include "ops/cuda/attention/flash_run.h"

namespace ft::cuda {

namespace {
std::atomic<bool> g_wgmma_allowed{true};

// A process-wide override of a dispatch threshold (tests, the benchmark): any T >= 0; -1 restores
// the default.
struct ThresholdOverride {
  std::atomic<int> t{-1};
  int or_else(int fallback) const {
    const int v = t.load(std::memory_order_relaxed);
    return v >= 0 ? v : fallback;
  }
  void set(int T) { t = T < 0 ? -1 : T; }
};

// A sequence-length threshold of the dispatch, one default without dropout and one with, which the
// tests can override.
struct DispatchThreshold {
  int without_dropout, with_dropout;
  ThresholdOverride overridden{};  // {}: the definitions below give only the two defaults
  int get(bool dropout) const { return overridden.or_else(dropout ? with_dropout : without_dropout); }
  void set(int T) { overridden.set(T); }
};

// Where the wide backward wins (H200, bwd ms, 4-warp / wide; bench/attention/NOTES.md, session 5):
// p = 0 T = 1024 0.818 / 0.849, T = 2048 1.353 / 1.264, T = 4096 2.51 / 2.17; with dropout
// T = 2048 1.462 / 1.520, T = 4096 2.70 / 2.65, T = 16384 10.06 / 9.43.
DispatchThreshold g_bwd_wide_min_t{2048, 4096};  // D = 64
// D = 128, the 64 x 128 wide tile (H100, bwd ms, 4-warp / wide, session 14; NOTES.md): p = 0
// T = 1024 at best level, T = 2048 1.371 / 1.368, T = 4096 2.455 / 2.331, T = 16384 8.28 / 7.43;
// with dropout T = 1024 0.858 / 0.902, T = 2048 1.511 / 1.467, T = 4096 2.819 / 2.610, T = 16384
// 9.59 / 8.28.
DispatchThreshold g_bwd_wide128_min_t{4096, 2048};
// Where the one-warpgroup forward tile wins (H100, fwd ms, two-warpgroup / one-warpgroup tile,
// session 8): p = 0.1 T = 1024 0.385-0.388 / 0.357-0.360, T = 2048 0.600-0.634 / 0.575-0.578,
// T = 4096 1.060-1.074 / 1.006-1.008, T = 8192 1.93-1.94 / 1.93-1.98, T = 16384 3.70 / 3.74; p = 0
// level up to T = 2048 (0.276 / 0.264-0.274, 0.396 / 0.390-0.397), then behind (T = 4096 0.613 /
// 0.646-0.720, T = 16384 2.16-2.20 / 2.50-2.58).
DispatchThreshold g_fwd_small_tile_max_t{2048, 4096};
// The warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh) from T = 1024 on, D = 64 and 128
// (H100, session 16, B T = 32768, bwd ms, the other kernels / ws, atomic dQ): D = 64 p = 0 T = 1024
// 0.793 / 0.700, T = 4096 2.161 / 1.648, T = 16384 7.41 / 5.38; p = 0.1 0.876 / 0.877, 2.582 / 2.056,
// 8.47 / 6.72. D = 128 p = 0 0.804 / 0.578, 2.301 / 1.447, 7.49 / 4.63; p = 0.1 0.921 / 0.726, 2.574 /
// 1.689, 8.20 / 5.54. Below T = 1024 it is unmeasured. Tests and the benchmark move it
// (flash_bwd_ws_min_t below).
constexpr int kBwdWsMinT = 1024;
ThresholdOverride g_bwd_ws_min_t;
// The warp-specialised Hopper forward (flash_fwd_ws_kernel.cuh), in flash_fwd_ws_form's form: at
// D = 128 from T = 1024 on, at D = 64 from T = 2048. D = 128 since the branch-free masks (H200,
// session 27, B T = 32768, p = 0, stream timing, fwd ms, the wgmma forward / ws): T = 1024 0.185 /
// 0.151 (two calls), T = 2048 ws 0.247 against cuDNN's 0.211 (before the masks the wgmma forward
// and ws were level there, 0.301-0.319); session 17 T = 4096 0.788 / 0.516, T = 16384 2.390 /
// 1.497. D = 64 (3 consumer warpgroups and the overlap; session 17) T = 1024 0.231 / 0.470,
// T = 2048 0.357 / 0.530, T = 4096 0.668 / 0.752, T = 16384 2.200 / 2.070 (2-6% apart across calls;
// T = 8192 level, 1.164 / 1.158: bench/attention/NOTES.md). D = 64 from T = 4096 since three calls
// agree (stream timing, wgmma forward / ws): session 29 T = 4096 0.598 / 0.579, T = 8192 1.114 /
// 1.078; session 31 (call 3, both library orders) T = 4096 0.593 / 0.563 and 0.586 / 0.572,
// T = 8192 1.113 / 1.010 and 1.107 / 1.024; T = 2048 3-5% the other way (0.309 / 0.323) until the
// persistent form below (session 32: ncu 399.1 / 381.8 us; stream 0.308 / 0.305 and 0.288). At
// T = 1024 the wgmma forward stays ahead of even the persistent form (ncu 231.6 / 271.4 us).
constexpr int kFwdWsMinT64 = 2048, kFwdWsMinT128 = 1024;
ThresholdOverride g_fwd_ws_min_t;
// Its persistent form (kPersistent: a CTA per SM takes query blocks from a counter, the next block's
// Q and first K / V loading under this one's last tiles and epilogue) where a block has at most 32
// key tiles on average: causal up to T = 8192, non-causal up to 4096. Longer blocks leave little
// fixed cost to hide, and there it lost 2-3%. H200, session 32 call 5, ncu us of the kernel, one CTA
// a block / persistent. Causal, B T = 32768, H D = 768: D = 128 T = 1024 195.0 / 169.0, 4096 504.1 /
// 468.1, 8192 908.8 / 866.6, 16384 1622.6 / 1662.7; D = 64 T = 2048 413.2 / 380.3 (the wgmma
// forward 399.1, call 1), 4096 694.0 / 674.3, 8192 1195.5 / 1198.3, 16384 2245.1 / 2314.8.
// Non-causal, B T = 16384, H D = 2048: D = 128 T = 4096 1152.8 / 1155.1, 8192 2198.2 / 2245.6;
// D = 64 T = 4096 1565.5 / 1545.7, 8192 2868.9 / 2967.2.
constexpr int kFwdWsPersistentMaxKeys = 4096;  // T, halved when causal
ThresholdOverride g_fwd_ws_persistent;
std::atomic<int> g_fwd_ws_persistent_ctas_cap{0};

// A threshold's default from the environment variable `name` (read by the caller once), else
// `fallback`; anything but an integer >= 0 is an error.
int min_t_from_env(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long t = std::strtol(v, &end, 10);
  if (*end != '\0' || t < 0 || t > INT_MAX)
    throw Error(str(name, "=", v, ": expected a sequence length (an integer >= 0)"));
  return static_cast<int>(t);
}

// -1: not set by set_flash_deterministic_dq (then the environment, else kAuto).
std::atomic<int> g_deterministic_dq{-1};
FlashDeterministicDq deterministic_dq_from_env() {
  const char* v = std::getenv("FLASHTRAIN_DETERMINISTIC_DQ");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return FlashDeterministicDq::kAuto;
  if (std::strcmp(v, "fixed") == 0) return FlashDeterministicDq::kFixedPoint;
  if (std::strcmp(v, "ordered") == 0) return FlashDeterministicDq::kOrdered;
  if (std::strcmp(v, "stored_ds") == 0) return FlashDeterministicDq::kStoredDs;
  throw Error(str("FLASHTRAIN_DETERMINISTIC_DQ=", v, ": expected auto, fixed, ordered or stored_ds"));
}
}  // namespace

FlashDeterministicDq flash_deterministic_dq() {
  const int set = g_deterministic_dq.load(std::memory_order_relaxed);
  if (set >= 0) return static_cast<FlashDeterministicDq>(set);
  static const FlashDeterministicDq from_env = deterministic_dq_from_env();
  return from_env;
}
void set_flash_deterministic_dq(FlashDeterministicDq how) { g_deterministic_dq = static_cast<int>(how); }

bool flash_stored_ds_dq(const AttentionParams& p) {
  // Built only into the warp-specialised backward (its TMA maps, sm_90a).
  if (!flash::flash_bwd_ws_runs_here(p)) return false;
  switch (flash_deterministic_dq()) {
    case FlashDeterministicDq::kStoredDs: return true;
    case FlashDeterministicDq::kFixedPoint:
    case FlashDeterministicDq::kOrdered: return false;
    case FlashDeterministicDq::kAuto: break;
  }
  // H100, session 26 call 1, B T = 32768, causal, bwd ms, fixed point / stored dS / atomic (not
  // deterministic): D = 128 p = 0 T = 1024 0.741 / 0.630 / 0.639, T = 4096 1.728 / 1.459 / 1.432,
  // T = 16384 5.284 / 4.736 / 4.611; p = 0.1 0.803 / 0.720 / 0.668, 1.933 / 1.754 / 1.733, 6.206 /
  // 5.723 / 5.524. D = 64 it loses (dS is twice the bytes per FLOP there, and the backward gets no
  // faster without its dQ product): p = 0 0.881 / 0.922, 1.993 / 2.316, 6.180 / 7.394. Its workspace
  // grows as T^2 (B H T^2 bytes causal, against the fixed point's 8 B H T D): taken up to
  // kStoredDsMaxBytes, the ordered dQ beyond (flash_fixed_point_dq).
  constexpr int64_t kStoredDsMaxBytes = int64_t{1} << 30;
  return p.D == 128 && flash_attention_backward_workspace(p).ds_floats * 4 <= kStoredDsMaxBytes;
}

namespace {
// Whether the warp-specialised backward takes p and has the ordered dQ at its head dim (D = 64, 128).
bool ws_ordered_dq_runs(const AttentionParams& p) {
  return flash::flash_bwd_ws_runs_here(p) && flash::flash_bwd_ws_has_ordered_dq(p.D);
}
}  // namespace

bool flash_fixed_point_dq(const AttentionParams& p) {
  switch (flash_deterministic_dq()) {
    case FlashDeterministicDq::kFixedPoint: return true;
    case FlashDeterministicDq::kOrdered: return false;
    case FlashDeterministicDq::kAuto:
    case FlashDeterministicDq::kStoredDs: break;  // where the stored dS is not built: kAuto's choice
  }
  // bwd ms, fixed point / ordered (H100, session 13): D = 64 p = 0 T = 1024 1.02 / 0.87, T = 4096
  // 2.59 / 2.68; p = 0.1 T = 1024 1.07 / 1.13. D = 256 T = 1024 p = 0.1 1.12 / 1.04, T = 4096 3.39 /
  // 3.41 (p = 0 3.39 / 3.47). D = 128 from T = 4096 on, where the fixed point runs on the wide tile
  // (session 14): p = 0 T = 4096 2.745 / 2.964 (the split form 2.887), T = 16384 8.60 / 9.93 (10.42);
  // p = 0.1 T = 4096 2.952 / 3.565, T = 16384 9.32 / 13.36.
  const bool dropout = p.dropout.threshold != 0;
  // Where the warp-specialised backward has the ordered dQ (D = 64) it takes that instead: fp32 bulk
  // adds in key-block order (flash_bwd_ws_kernel.cuh). H200, session 28 call 6, B T = 32768, causal,
  // bwd ms, fixed point / ordered / atomic (not deterministic): p = 0 T = 1024 0.646 / 0.605 / 0.544,
  // T = 4096 1.717 / 1.612 / 1.429, T = 16384 5.926 / 5.731 / 5.334; p = 0.1 0.779 / 0.729 / 0.697,
  // 2.102 / 2.056 / 1.988, 7.330 / 7.273 / 7.094 (bench/results/attention-ordered-dq-h200.md).
  // D = 128 (dQ split by columns; where the stored dS is over its cap), H200, session 33 call 1,
  // B T = 32768, T = 16384, bwd ms, fixed point / ordered / atomic: p = 0 5.692 / 4.851 / 4.475,
  // p = 0.1 6.397 / 5.351 / 5.406 (at T = 4096 the stored dS, 1.29, beats the ordered 1.92).
  if (ws_ordered_dq_runs(p)) return false;
  if (p.T >= 4096) return true;
  // Where the warp-specialised backward is enabled its deterministic form is the fixed-point one
  // (bulk int64 adds; flash_bwd_ws_kernel.cuh). H100, session 16, bwd ms, ws fixed point / the
  // 4-warp ordered dQ: D = 64 T = 1024 p = 0 0.862 / 0.880, p = 0.1 1.014 / 1.050; D = 128 p = 0
  // 0.739 / 0.987.
  if (flash::flash_bwd_ws_enabled_for(p) && flash::flash_bwd_ws_has_fixed_point_dq(p.D)) return true;
  return dropout && p.D <= 128;
}

bool flash_ws_ordered_dq(const AttentionParams& p) {
  return !flash_stored_ds_dq(p) && !flash_fixed_point_dq(p) && ws_ordered_dq_runs(p);
}

bool flash_backward_deterministic(const AttentionParams& p, bool asked) {
  if (asked) return true;
  // A form forced for measurement (FLASHTRAIN_DETERMINISTIC_DQ) leaves calls that did not ask atomic.
  // Both forms below exist only where the warp-specialised backward runs (flash_stored_ds_dq and
  // ws_ordered_dq_runs each ask flash_bwd_ws_runs_here).
  if (flash_deterministic_dq() != FlashDeterministicDq::kAuto) return false;
  const bool dropout = p.dropout.threshold != 0;
  // H200, session 36 call 1 (bench/results/attention-h200.md at 868c316), B T = 32768, causal, bwd ms,
  // atomic / kAuto's deterministic form: D = 128 p = 0 T = 1024 0.474 / 0.446, 2048 0.723 / 0.709,
  // 4096 1.238 / 1.248 (fwd+bwd 1.691 / 1.663), 16384 4.286 / 4.557 (the ordered dQ: over the stored
  // dS's cap); p = 0.1 0.560 / 0.509, 0.917 / 0.822, 1.565 / 1.499, 5.400 / 5.113. D = 64 (the
  // ordered dQ) p = 0.1 0.666 / 0.630, 1.092 / 1.037, 2.014 / 2.104, 7.111 / 7.594; p = 0 level at
  // T = 1024 (0.516 / 0.509), atomic ahead beyond. Session 34's table (404a8f9) agrees on each sign.
  if (p.D == 128) return flash_stored_ds_dq(p) || (dropout && ws_ordered_dq_runs(p));
  if (p.D == 64) return dropout && p.T <= 2048 && ws_ordered_dq_runs(p);
  return false;
}

// FLASHTRAIN_FLASH_BWD_WS_MIN_T (read once) moves the default, so that a training run can take the
// kernel before the default does (bench/attention/dev/ws_call.sh); set_flash_bwd_ws_min_t wins over it.
int flash_bwd_ws_min_t() {
  static const int from_env = min_t_from_env("FLASHTRAIN_FLASH_BWD_WS_MIN_T", kBwdWsMinT);
  return g_bwd_ws_min_t.or_else(from_env);
}
void set_flash_bwd_ws_min_t(int T) { g_bwd_ws_min_t.set(T); }
// FLASHTRAIN_FLASH_FWD_WS_MIN_T, as the backward's, moves the threshold at both head dims.
int flash_fwd_ws_min_t(int head_dim) {
  static const int from_env = min_t_from_env("FLASHTRAIN_FLASH_FWD_WS_MIN_T", -1);  // -1: not set
  return g_fwd_ws_min_t.or_else(from_env >= 0 ? from_env : head_dim == 128 ? kFwdWsMinT128 : kFwdWsMinT64);
}
void set_flash_fwd_ws_min_t(int T) { g_fwd_ws_min_t.set(T); }
// FLASHTRAIN_FLASH_FWD_WS_PERSISTENT_MAX_KEYS (read once) moves kFwdWsPersistentMaxKeys (0: never
// persistent), so that a run can compare the two forms on its own card without a rebuild.
bool flash_fwd_ws_persistent(int T, bool causal) {
  static const int max_keys = min_t_from_env("FLASHTRAIN_FLASH_FWD_WS_PERSISTENT_MAX_KEYS", kFwdWsPersistentMaxKeys);
  const int keys = causal ? T / 2 : T;
  return g_fwd_ws_persistent.or_else(max_keys > 0 && keys <= max_keys) != 0;
}
void set_flash_fwd_ws_persistent(int on) { g_fwd_ws_persistent.set(on); }
int flash_fwd_ws_persistent_ctas_cap() { return g_fwd_ws_persistent_ctas_cap.load(std::memory_order_relaxed); }
void set_flash_fwd_ws_persistent_ctas_cap(int n) { g_fwd_ws_persistent_ctas_cap = n < 0 ? 0 : n; }
int flash_fwd_small_tile_max_t(bool dropout) { return g_fwd_small_tile_max_t.get(dropout); }
void set_flash_fwd_small_tile_max_t(int T) { g_fwd_small_tile_max_t.set(T); }
int flash_bwd_wide_min_t(int head_dim, bool dropout) {
  return (head_dim == 128 ? g_bwd_wide128_min_t : g_bwd_wide_min_t).get(dropout);
}
void set_flash_bwd_wide_min_t(int T) {
  g_bwd_wide_min_t.set(T);
  g_bwd_wide128_min_t.set(T);
}

void set_flash_wgmma_allowed(bool allowed) { g_wgmma_allowed = allowed; }

bool flash_wgmma_enabled() { return g_wgmma_allowed && flash_sm90a_device(); }

bool flash_sm90a_device() {
#ifdef FT_FLASH_WGMMA
  // Compute capability per device, looked up once (sm_90a code runs on 9.0 only).
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cc[kMaxDevices] = {};  // 0: not looked up yet
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device >= kMaxDevices) return false;
  int v = cc[device].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    v = 10 * major + minor;
    cc[device].store(v, std::memory_order_relaxed);
  }
  return v == 90;
#else
  return false;
#endif
}

void flash_attention_forward(const AttentionParams& p, Stream stream) {
  switch (p.D) {
    case 64: return flash::run_flash_fwd<64>(p, stream);
    case 128: return flash::run_flash_fwd<128>(p, stream);
    case 256: return flash::run_flash_fwd<256>(p, stream);
    default: throw Error(str("[flash_attention_forward] head dim ", p.D, " not built (64, 128, 256)"));
  }
}

void flash_attention_backward(const AttentionParams& p, Stream stream, const FlashBackwardMode& asked) {
  const FlashBackwardMode mode{flash_backward_deterministic(p, asked.deterministic), asked.dq_semaphore};
  const FlashBackwardNeeds needs = flash_backward_needs(p, mode.deterministic);
  if ((needs.dq_semaphore && mode.dq_semaphore == nullptr) || (needs.dq_accum && p.dq_accum == nullptr))
    throw Error(str("[flash_attention_backward] missing workspace: dq_accum ", p.dq_accum != nullptr, " (needed ",
                    needs.dq_accum, "), dq_semaphore ", mode.dq_semaphore != nullptr, " (needed ",
                    needs.dq_semaphore, ")"));
  switch (p.D) {
    case 64: return flash::run_flash_bwd<64>(p, stream, mode);
    case 128: return flash::run_flash_bwd<128>(p, stream, mode);
    case 256: return flash::run_flash_bwd<256>(p, stream, mode);
    default: throw Error(str("[flash_attention_backward] head dim ", p.D, " not built (64, 128, 256)"));
  }
}

}  // namespace ft::cuda
