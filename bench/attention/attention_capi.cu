// A C ABI over the attention launchers, loaded by bench_attention.py through ctypes so our kernels
// and PyTorch's run in one process on the same tensors, timed and memory-counted the same way.
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I. -Xcompiler -fPIC -shared
//        bench/attention/attention_capi.cu ops/cuda/attention/*.cu ops/cuda/naive_attention.cu
//        ops/cuda/attention_kv_sum.cu ops/cpu/attention_fp8_reference.cpp ops/cpu/attention_reference.cpp
//        -lcublas -o libft_attention.so
// (or the CMake target ft_attention_capi). ft_attn_fp8_run is the FP8 forward (bench_fp8.py).
// Variants (flash D = 64, bf16 only; 32-41 at D = 128; 42-43 any dtype) are experiments kept for
// tuning; variant 0 is the shipped one.
#include <cublas_v2.h>

#include <climits>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "ops/cpu/attention_fp8_reference.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_fp8.h"
#if __has_include("ops/cuda/attention/flash_bwd_wgmma_pipe_kernel.cuh")
#include "ops/cuda/attention/flash_bwd_wgmma_pipe_kernel.cuh"
#define FT_HAVE_BWD_WGMMA_PIPE 1
#endif
#if __has_include("ops/cuda/attention/flash_bwd_wgmma_kernel.cuh")
#include "ops/cuda/attention/flash_bwd_wgmma_kernel.cuh"
#define FT_HAVE_BWD_WGMMA 1
#endif
#include "ops/cuda/attention/flash_fwd_wgmma_kernel.cuh"
#include "ops/cuda/attention/flash_launch.cuh"
#include "ops/cuda/attention_kv_sum.h"
#include "ops/cuda/naive_attention.h"

namespace {

using namespace ft;
using namespace ft::cuda::flash;

std::string g_error;
cublasHandle_t g_cublas = nullptr;
int* g_dq_semaphore = nullptr;  // the deterministic backward's counters, grown on demand
const int* g_doc_start = nullptr;  // the document mask of the following calls (null: off)
int64_t g_dq_semaphore_ints = 0;

int* dq_semaphore_for(const AttentionParams& p) {
  const int64_t need = ft::cuda::flash_attention_backward_workspace(p).dq_semaphore_ints;
  if (need > g_dq_semaphore_ints) {
    if (g_dq_semaphore) CUDA_CHECK(cudaFree(g_dq_semaphore));
    CUDA_CHECK(cudaMalloc(&g_dq_semaphore, need * sizeof(int)));
    g_dq_semaphore_ints = need;
  }
  return g_dq_semaphore;
}

// The mode of a call that does not ask for determinism: the counters are there for where the
// library takes a deterministic form anyway (flash_backward_deterministic; the ordered dQ needs them).
ft::cuda::FlashBackwardMode undeterministic(const AttentionParams& p) { return {false, dq_semaphore_for(p)}; }

// Variants for timing experiments (bf16 only, so the library builds fast). Each is a pair
// (forward, backward); group = launch-order tokens per head group (flash_launch.cuh).
template <class Fwd, bool kDropout>
void fwd_bf16(const AttentionParams& p, cudaStream_t s, int group) {
  launch_flash_fwd<Fwd, true, kDropout>(p, s, group);
}
void fwd_shipped_tiles(const AttentionParams& p, cudaStream_t s, int group) {
  using C = FlashConfig<64>;
  if (p.dropout.threshold != 0) return fwd_bf16<C::FwdDropout, true>(p, s, group);
  if (p.T <= C::kSmallT) return fwd_bf16<C::FwdSmallT, false>(p, s, group);
  return fwd_bf16<C::Fwd, false>(p, s, group);
}
template <class Bwd, bool kOrderedDq = false>
void bwd_bf16(const AttentionParams& p, cudaStream_t s, int group) {
  int* sem = kOrderedDq ? dq_semaphore_for(p) : nullptr;
  if (p.dropout.threshold != 0) return launch_flash_bwd<Bwd, true, true, kOrderedDq>(p, s, group, sem);
  return launch_flash_bwd<Bwd, true, false, kOrderedDq>(p, s, group, sem);
}
// The wide-tile backward (flash_bwd_wide_kernel.cuh) with atomic, (kOrderedDq) counter-ordered or
// (kFixedDq) fixed-point dQ.
template <class W, bool kOrderedDq = false, bool kFixedDq = false>
void bwd_wide_bf16(const AttentionParams& p, cudaStream_t s, int group) {
  int* sem = kOrderedDq ? dq_semaphore_for(p) : nullptr;
  if (p.dropout.threshold != 0) return launch_flash_bwd_wide<W, true, true, kOrderedDq, false, kFixedDq>(p, s, group, sem);
  return launch_flash_bwd_wide<W, true, false, kOrderedDq, false, kFixedDq>(p, s, group, sem);
}
void split_bf16(const AttentionParams& p, cudaStream_t s, int group) {
  using C = FlashConfig<64>;
  if (p.dropout.threshold != 0) return launch_flash_bwd_split<C::Bwd, C::BwdDq, true, true>(p, s, group);
  return launch_flash_bwd_split<C::Bwd, C::BwdDq, true, false>(p, s, group);
}

template <class Fwd>
void fwd_wgmma_bf16(const AttentionParams& p, cudaStream_t s, int group) {
  if (p.dropout.threshold != 0) return launch_flash_fwd_wgmma<Fwd, true, true>(p, s, group);
  return launch_flash_fwd_wgmma<Fwd, true, false>(p, s, group);
}
template <int kBM, bool kDqWgmma = false>
void bwd_wgmma_bf16(const AttentionParams& p, cudaStream_t s, int group) {
#ifdef FT_HAVE_BWD_WGMMA
  if (p.dropout.threshold != 0) return launch_flash_bwd_wgmma<kBM, true, true, true, kDqWgmma>(p, s, group);
  return launch_flash_bwd_wgmma<kBM, true, false, true, kDqWgmma>(p, s, group);
#else
  (void)p, (void)s, (void)group;
  throw Error("this build has no wgmma backward");
#endif
}

// 0: shipped (a call that does not ask for determinism; 67: the same with the atomic dQ forced).
// 1: the launch order of the kernels before the head-group order (one head at a time). 2, 3:
// diagnostics (wrong dQ): no dQ atomics / no dQ phase. 4: the shipped deterministic backward (any
// dtype / head dim). 5, 6: the two deterministic designs at every dropout: 5 the
// counter-ordered dQ, 6 the split backward (dK/dV kernel without its dQ phase, then
// flash_bwd_dq_kernel). Forward variants, each with the 4-warp backward at every T: 7, 9, 13-15 wgmma
// forwards (flash_fwd_wgmma_kernel.cuh): 7 one warpgroup, kBlockN 64, 3 stages, 3 CTAs/SM; 9 two
// warpgroups, kBlockN 128, 1 CTA/SM; 13 as 7 with O += P V left running into the next tile (ptxas
// serialises the wgmmas there: C7515); 14 three warpgroups (192 rows), 1 CTA/SM; 15 the two-
// warpgroup tile with 4 stages; 8 the mma.sync forward tiles (shipped before the wgmma forward). Backward
// variants after `git apply` of wgmma_bwd_pipelined_experiment.patch (NOTES.md: where it is), with the
// shipped forward: 10, 11 the wgmma backward with an mma.sync dQ phase, 64- / 32-query tiles; 16,
// 17 the same with its dQ phase on wgmma too; 18 the software-pipelined one. 19: the wide-tile
// backward (flash_bwd_wide_kernel.cuh, 8 warps, 128 x 128) at every T; 20 the same with 64-query
// tiles (slower); 21 the 4-warp backward (flash_bwd_kernel.cuh) at every T. 22-24: the forward's
// dropout calls drawn before the S wait (kEarlyCalls; three of four in the two-warpgroup tile): 22 one
// of four, 23 all four, 25 two (the two-warpgroup tile otherwise), 24 all eight of a 128-key tile at
// 1 CTA/SM (variant 9's tile). 26: the one-warpgroup tile (shipped up to T = 2048, 4096 with dropout) with 3 stages;
// 27, 28: the two- and one-warpgroup tiles as shipped, at every T. 29-31: the deterministic backward
// with the ordered dQ, the fixed-point dQ, the fixed-point dQ on the wide tile at every T
// (flash_deterministic_dq), any D and dtype, like 4. D = 128 forwards (run_d128_forward_variant), each
// with the shipped backward: 32 the mma.sync forward (shipped before the D = 128 wgmma forward), 33
// and 34 the wgmma forward's one- and two-warpgroup tiles as shipped, at every T, 35 the two-
// warpgroup tile with 128-key tiles and 2 stages, 36 the two-warpgroup tile with O += P V as one n128
// wgmma per k step (kPvN128; its descriptor is unchecked: run --dev, whose check compares it with 0).
// D = 128 backwards on the wide tile (run_d128_backward_variant; flash_bwd_wide_kernel.cuh, 8 warps,
// at every T), each with the shipped forward: 37, 38 128 queries x 64 keys with atomic / fixed-point
// dQ; 39, 40 FlashConfig<128>::BwdWide (64 queries x 128 keys, FlashAttention-2's hdim-128 tile;
// shipped from flash_bwd_wide_min_t on) with atomic / fixed-point dQ, 41 the same with the
// counter-ordered dQ. 42, 43: the warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh; D = 64 and
// 128, any dtype and dropout) at every T with atomic / fixed-point dQ; 44, 45: the dispatch without it
// (shipped up to session 15), atomic / deterministic. 46: the warp-specialised Hopper forward
// (flash_fwd_ws_kernel.cuh; D = 64 and 128, any dtype, no dropout) at every T, with the shipped
// backward; calls it does not cover take the shipped forward. 47-49: the same with its intra-warpgroup
// overlap (FlashFwdWsTraits::kOverlap), its consumers' ping-pong (kPingPong), both; 50-53: 46-49 with
// 3 stages (kStages); 57, 58: 3 consumer warpgroups (kConsumers; D = 64), plain and with the overlap. Numbers, and the variants
// tried and removed: bench/attention/NOTES.md.
// Variants 32-36 (D = 128, bf16, no document mask): see run_flash_variant.
void run_d128_forward_variant(int variant, const AttentionParams& p, cudaStream_t s) {
  using C = FlashConfig<128>;
  if (p.dtype != AttentionDType::kBF16) throw Error("variants are built for bf16 only");
  if (p.doc_start != nullptr) throw Error(str("variant ", variant, " has no document mask (variants 0 and 4 do)"));
  switch (variant) {
    case 32:
      if (p.dropout.threshold != 0) return fwd_bf16<C::FwdDropout, true>(p, s, C::kGroupTokens);
      return fwd_bf16<C::Fwd, false>(p, s, C::kGroupTokens);
    case 33: return fwd_wgmma_bf16<C::FwdWgmmaSmallT>(p, s, C::kGroupTokens);
    case 34: return fwd_wgmma_bf16<C::FwdWgmma>(p, s, C::kGroupTokens);
    case 35: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<128, 128, 2, 1, 2, true, 2>>(p, s, C::kGroupTokens);
    case 36: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<128, 64, 3, 1, 2, true, 2, false, true>>(p, s, C::kGroupTokens);
    default: throw Error(str("unknown D = 128 variant ", variant));
  }
}

// Variants 37-41 (D = 128, bf16, no document mask): the backward; see run_flash_variant.
void run_d128_backward_variant(int variant, const AttentionParams& p, cudaStream_t s) {
  using C = FlashConfig<128>;
  using Wide128x64 = FlashBwdWideTraits<128, 128, 64>;
  if (p.dtype != AttentionDType::kBF16) throw Error("variants are built for bf16 only");
  if (p.doc_start != nullptr) throw Error(str("variant ", variant, " has no document mask (variants 0 and 4 do)"));
  switch (variant) {
    case 37: return bwd_wide_bf16<Wide128x64>(p, s, C::kGroupTokens);
    case 38: return bwd_wide_bf16<Wide128x64, false, true>(p, s, C::kGroupTokens);
    case 39: return bwd_wide_bf16<C::BwdWide>(p, s, C::kGroupTokens);
    case 40: return bwd_wide_bf16<C::BwdWide, false, true>(p, s, C::kGroupTokens);
    case 41: return bwd_wide_bf16<C::BwdWide, true>(p, s, C::kGroupTokens);
    default: throw Error(str("unknown D = 128 variant ", variant));
  }
}

// Moves one of the dispatch's T thresholds (flash_attention.h) to kT when `on` (0: its kernel takes
// every T; INT_MAX: none), and restores the default however the call ends.
template <void (*kSetMinT)(int), int kT = 0>
struct KernelAtEveryT {
  bool on;
  explicit KernelAtEveryT(bool o) : on(o) {
    if (on) kSetMinT(kT);
  }
  ~KernelAtEveryT() {
    if (on) kSetMinT(-1);
  }
  KernelAtEveryT(const KernelAtEveryT&) = delete;
};
template <void (*kSetMinT)(int)>
using KernelNever = KernelAtEveryT<kSetMinT, INT_MAX>;

void run_flash_variant(bool forward, int variant, const AttentionParams& p, cudaStream_t s) {
  // Deterministic: as shipped (4), the ordered dQ (29; where the warp-specialised backward runs, at
  // D = 64, its fp32 bulk adds in key-block order), the fixed-point dQ (30), the fixed-point dQ with
  // the wide tile at every T (31; D = 64 and 128), the stored dS (63; where the warp-specialised
  // backward runs, else as 4; its workspace: ft_attn_dq_workspace_floats).
  if (variant == 4 || (variant >= 29 && variant <= 31) || variant == 63) {
    if (forward) return ft::cuda::flash_attention_forward(p, s);
    using ft::cuda::FlashDeterministicDq;
    const ft::cuda::ScopedFlashDeterministicDq form(variant == 4    ? ft::cuda::flash_deterministic_dq()
                                                    : variant == 29 ? FlashDeterministicDq::kOrdered
                                                    : variant == 63 ? FlashDeterministicDq::kStoredDs
                                                                    : FlashDeterministicDq::kFixedPoint);
    // 31: the wide tile from T = 0 on (and the warp-specialised backward, which goes first, off).
    const KernelAtEveryT<ft::cuda::set_flash_bwd_wide_min_t> wide(variant == 31);
    const KernelNever<ft::cuda::set_flash_bwd_ws_min_t> no_ws(variant == 31);
    return ft::cuda::flash_attention_backward(p, s, {true, dq_semaphore_for(p)});
  }
  // 42 / 43: the warp-specialised Hopper backward (flash_bwd_ws_kernel.cuh) at every T, atomic /
  // fixed-point dQ; calls it does not cover (D = 256, document masks) take the usual kernels. 44 /
  // 45: the dispatch without it (as shipped up to session 15), atomic / deterministic as variant 4.
  if (variant == 44 || variant == 45) {
    if (forward) return ft::cuda::flash_attention_forward(p, s);
    const KernelNever<ft::cuda::set_flash_bwd_ws_min_t> no_ws(true);
    if (variant == 44) return ft::cuda::flash_attention_backward(p, s, undeterministic(p));
    return ft::cuda::flash_attention_backward(p, s, {true, dq_semaphore_for(p)});
  }
  // 46: the warp-specialised Hopper forward (flash_fwd_ws_kernel.cuh) at every T; calls it does not
  // cover (dropout, document masks, D = 256, other GPUs) take the shipped forwards.
  // 47-49: the same with its intra-warpgroup overlap (kOverlap), its ping-pong (kPingPong), both
  // (the dispatch's form at D = 128: flash_fwd_ws_form).
  // 50-53: 46-49 with a 3-stage K / V ring. 57, 58: 3 consumer warpgroups (192 rows), plain and with
  // the overlap (D = 64; 58 is the dispatch's form there). 54-56, 59-62: experiments of session 17,
  // removed (bench/attention/NOTES.md).
  // 64: the dispatch's form at the head dim (flash_fwd_ws_form), persistent (kPersistent), at every T;
  // 65: that form not persistent, launched rank-major over every head (FlashFwdWsForm::rank_major).
  // 66: persistent with the ping-pong and without the overlap (D = 128).
  if ((variant >= 46 && variant <= 53) || (variant >= 57 && variant <= 58) || (variant >= 64 && variant <= 66)) {
    if (!forward) return ft::cuda::flash_attention_backward(p, s, undeterministic(p));
    const KernelAtEveryT<ft::cuda::set_flash_fwd_ws_min_t> ws(true);
    if (!ft::cuda::flash::flash_fwd_ws_applies(p)) return ft::cuda::flash_attention_forward(p, s);
    if (variant == 64) return ft::cuda::flash::run_flash_fwd_ws(p, s, ft::cuda::flash::flash_fwd_ws_form(p.D, true));
    if (variant == 66) return ft::cuda::flash::run_flash_fwd_ws(p, s, {false, true, 2, 2, true});
    if (variant == 65) {
      ft::cuda::flash::FlashFwdWsForm form = ft::cuda::flash::flash_fwd_ws_form(p.D, false);
      form.rank_major = true;
      return ft::cuda::flash::run_flash_fwd_ws(p, s, form);
    }
    if (variant >= 57) return ft::cuda::flash::run_flash_fwd_ws(p, s, {variant == 58, false, 2, 3});
    const int option = (variant - 46) % 4;  // 0 plain, 1 overlap, 2 ping-pong, 3 both
    return ft::cuda::flash::run_flash_fwd_ws(p, s, {option == 1 || option == 3, option >= 2, variant >= 50 ? 3 : 2});
  }
  if (variant == 42 || variant == 43) {
    if (forward) return ft::cuda::flash_attention_forward(p, s);
    const KernelAtEveryT<ft::cuda::set_flash_bwd_ws_min_t> ws(true);
    if (variant == 42) return ft::cuda::flash_attention_backward(p, s, undeterministic(p));
    const ft::cuda::ScopedFlashDeterministicDq form(ft::cuda::FlashDeterministicDq::kFixedPoint);
    return ft::cuda::flash_attention_backward(p, s, {true, dq_semaphore_for(p)});
  }
  if (p.D == 128 && variant >= 32 && variant <= 36) {
    if (forward) return run_d128_forward_variant(variant, p, s);
    return ft::cuda::flash_attention_backward(p, s, undeterministic(p));
  }
  if (p.D == 128 && variant >= 37 && variant <= 41) {
    if (forward) return ft::cuda::flash_attention_forward(p, s);
    return run_d128_backward_variant(variant, p, s);
  }
  // 67: the atomic dQ wherever the dispatch would take a deterministic form for a call that did not
  // ask (flash_backward_deterministic leaves such calls atomic while a form is forced).
  if (variant == 67) {
    if (forward) return ft::cuda::flash_attention_forward(p, s);
    const ft::cuda::ScopedFlashDeterministicDq form(ft::cuda::FlashDeterministicDq::kOrdered);
    return ft::cuda::flash_attention_backward(p, s, undeterministic(p));
  }
  if (p.D != 64 || variant == 0) {
    forward ? ft::cuda::flash_attention_forward(p, s) : ft::cuda::flash_attention_backward(p, s, undeterministic(p));
    return;
  }
  if (p.dtype != AttentionDType::kBF16) throw Error("variants are built for bf16 only");
  // The tuning variants instantiate the kernels without the document mask (kDocMask false: its
  // code costs the dense kernels registers); the shipped paths (variants 0 and 4) take it.
  if (p.doc_start != nullptr) throw Error(str("variant ", variant, " has no document mask (variants 0 and 4 do)"));
  if (variant < 1 || variant > 28) throw Error(str("unknown variant ", variant));
  const int group = variant == 1 ? 0 : FlashConfig<64>::kGroupTokens;
  if (forward) {
    switch (variant) {
      case 7: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 3, 1>>(p, s, group);
      case 9: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 128, 3, 1, 2>>(p, s, group);
      case 13: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 3, 1, false>>(p, s, group);
      case 14: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 1, 3>>(p, s, group);
      case 15: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 4, 2, 2>>(p, s, group);
      case 22: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 2, 2, true, 1>>(p, s, group);
      case 23: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 2, 2, true, 4>>(p, s, group);
      case 24: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 128, 3, 1, 2, true, 8>>(p, s, group);
      case 25: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 2, 2, true, 2>>(p, s, group);
      case 26: return fwd_wgmma_bf16<FlashFwdWgmmaTraits<64, 64, 3, 3, 1, true, 4>>(p, s, group);
      case 27: return fwd_wgmma_bf16<FlashConfig<64>::FwdWgmma>(p, s, group);
      case 28:
        if (p.dropout.threshold != 0) return fwd_wgmma_bf16<FlashConfig<64>::FwdWgmmaSmallTDropout>(p, s, group);
        return fwd_wgmma_bf16<FlashConfig<64>::FwdWgmmaSmallT>(p, s, group);
      case 1: case 8: return fwd_shipped_tiles(p, s, group);
      default: return ft::cuda::flash_attention_forward(p, s);  // the shipped forward
    }
  }
  switch (variant) {
    case 1: return bwd_bf16<FlashConfig<64>::Bwd>(p, s, group);
    case 2: return bwd_bf16<FlashBwdTraits<64, 32, 64, 4, false, 3, 1, 1>>(p, s, group);
    case 3: return bwd_bf16<FlashBwdTraits<64, 32, 64, 4, false, 3, 1, 2>>(p, s, group);
    case 5: return bwd_bf16<FlashConfig<64>::Bwd, true>(p, s, group);
    case 6: return split_bf16(p, s, group);
    case 10: return bwd_wgmma_bf16<64>(p, s, group);
    case 11: return bwd_wgmma_bf16<32>(p, s, group);
    case 16: return bwd_wgmma_bf16<64, true>(p, s, group);
    case 18:
#ifdef FT_HAVE_BWD_WGMMA_PIPE
      if (p.dropout.threshold != 0) return launch_flash_bwd_wgmma_pipe<true, true>(p, s, group);
      return launch_flash_bwd_wgmma_pipe<true, false>(p, s, group);
#else
      throw Error("this build has no pipelined wgmma backward");
#endif
    case 17: return bwd_wgmma_bf16<32, true>(p, s, group);
    case 19: return bwd_wide_bf16<FlashBwdWideTraits<64>>(p, s, group);
    case 20: return bwd_wide_bf16<FlashBwdWideTraits<64, 64>>(p, s, group);
    default: return bwd_bf16<FlashConfig<64>::Bwd>(p, s, group);  // 7-9, 13-15, 21: the 4-warp backward
  }
}

// One call of ft_attn_run / ft_attn_run_gqa. H_kv < H: grouped-query attention, whose backward
// writes per-query-head dK, dV into dkv_partial (2 x (B, T, H, D) contiguous: dK's, then dV's) and
// sums each group into dk, dv as the ops front door does (ops/attention.cpp).
int run_attention(int op, int impl, int variant, void* q, void* k, void* v, void* o, float* lse, void* dout,
                  void* dq, void* dk, void* dv, float* dsum, float* dq_accum, void** naive_bufs, int B, int T,
                  int H, int H_kv, int D, const long long* qkv_strides, int causal, float dropout_p,
                  unsigned long long seed, unsigned long long offset, int dtype, float softmax_scale,
                  void* dkv_partial, void* stream) {
  try {
    AttentionParams p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse, p.dout = dout, p.dq = dq, p.dk = dk, p.dv = dv;
    p.dsum = dsum, p.dq_accum = dq_accum;
    p.B = B, p.T = T, p.H = H, p.H_kv = H_kv, p.D = D;
    p.softmax_scale = softmax_scale;
    p.causal = causal != 0;
    p.dtype = dtype == 0 ? AttentionDType::kBF16 : AttentionDType::kF16;
    p.dropout = make_dropout_params(PhiloxState{seed, offset}, dropout_p);
    p.doc_start = g_doc_start;
    for (int64_t* s : {&p.q_batch_stride, &p.k_batch_stride, &p.v_batch_stride,
                         &p.dq_batch_stride, &p.dk_batch_stride, &p.dv_batch_stride})
      *s = qkv_strides[0];
    for (int64_t* s : {&p.q_row_stride, &p.k_row_stride, &p.v_row_stride, &p.dq_row_stride,
                         &p.dk_row_stride, &p.dv_row_stride})
      *s = qkv_strides[1];
    for (int64_t* s : {&p.q_head_stride, &p.k_head_stride, &p.v_head_stride,
                         &p.dq_head_stride, &p.dk_head_stride, &p.dv_head_stride})
      *s = qkv_strides[2];
    const BthdStrides c = contiguous_bthd_strides(T, H, D);
    p.o_batch_stride = p.do_batch_stride = c.batch;
    p.o_row_stride = p.do_row_stride = c.row;
    p.o_head_stride = p.do_head_stride = c.head;
    const bool grouped = op == 1 && H_kv != H;
    if (grouped) {
      if (dkv_partial == nullptr) throw Error("grouped-query backward needs dkv_partial");
      p.dk = dkv_partial;
      p.dv = static_cast<char*>(dkv_partial) + static_cast<int64_t>(B) * T * H * D * 2;
      p.dk_batch_stride = p.dv_batch_stride = c.batch;
      p.dk_row_stride = p.dv_row_stride = c.row;
      p.dk_head_stride = p.dv_head_stride = c.head;
    }
    auto s = static_cast<cudaStream_t>(stream);
    if (impl == 0) {
      run_flash_variant(op == 0, variant, p, s);
    } else {
      if (!g_cublas) CUBLAS_CHECK(cublasCreate(&g_cublas));
      const ft::cuda::NaiveAttentionBuffers buf{static_cast<float*>(naive_bufs[0]), naive_bufs[1],
                                                naive_bufs[2], naive_bufs[3]};
      op == 0 ? ft::cuda::naive_attention_forward(p, buf, g_cublas, s)
              : ft::cuda::naive_attention_backward(p, buf, g_cublas, s);
    }
    if (grouped) {
      ft::cuda::AttentionKvSumParams kp;
      kp.out_batch_stride = qkv_strides[0], kp.out_row_stride = qkv_strides[1], kp.out_head_stride = qkv_strides[2];
      kp.B = B, kp.T = T, kp.H = H, kp.H_kv = H_kv, kp.D = D;
      kp.dtype = dtype == 0 ? DType::BF16 : DType::F16;
      kp.partial = p.dk, kp.out = dk;
      ft::cuda::attention_kv_sum(kp, s);
      kp.partial = p.dv, kp.out = dv;
      ft::cuda::attention_kv_sum(kp, s);
    }
    return 0;
  } catch (const std::exception& e) {
    g_error = e.what();
    return 1;
  }
}

}  // namespace

extern "C" {

const char* ft_attn_last_error() { return g_error.c_str(); }

// The document mask (ops/attention_params.h) of the calls that follow: doc_start (B, T) int32 on the
// device, or null for none. Kept apart from ft_attn_run so that call's signature stays as it was.
void ft_attn_set_doc_start(const int* doc_start) { g_doc_start = doc_start; }

// op: 0 forward, 1 backward. impl: 0 flash, 1 naive. Layout: q, k, v, dq, dk, dv share
// (batch, row, head) strides qkv_strides[3]; o, dout are contiguous (B, T, H, D).
// naive_bufs: scores (fp32), probs, probs_dropped, dscores, each B*H*T*T.
int ft_attn_run(int op, int impl, int variant, void* q, void* k, void* v, void* o, float* lse,
                void* dout, void* dq, void* dk, void* dv, float* dsum, float* dq_accum,
                void** naive_bufs, int B, int T, int H, int D, const long long* qkv_strides,
                int causal, float dropout_p, unsigned long long seed, unsigned long long offset,
                int dtype, float softmax_scale, void* stream) {
  return run_attention(op, impl, variant, q, k, v, o, lse, dout, dq, dk, dv, dsum, dq_accum, naive_bufs, B, T, H, H,
                       D, qkv_strides, causal, dropout_p, seed, offset, dtype, softmax_scale, nullptr, stream);
}

// ft_attn_run with grouped-query attention: k, v, dk, dv have H_kv heads (a divisor of H), with the
// same (batch, row, head) strides as q (slices of one (B, T, (H + 2 H_kv) D) buffer). The backward
// needs dkv_partial when H_kv < H: 2 * B * T * H * D elements of the dtype.
int ft_attn_run_gqa(int op, int impl, int variant, void* q, void* k, void* v, void* o, float* lse,
                    void* dout, void* dq, void* dk, void* dv, float* dsum, float* dq_accum,
                    void** naive_bufs, int B, int T, int H, int H_kv, int D, const long long* qkv_strides,
                    int causal, float dropout_p, unsigned long long seed, unsigned long long offset,
                    int dtype, float softmax_scale, void* dkv_partial, void* stream) {
  return run_attention(op, impl, variant, q, k, v, o, lse, dout, dq, dk, dv, dsum, dq_accum, naive_bufs, B, T, H,
                       H_kv, D, qkv_strides, causal, dropout_p, seed, offset, dtype, softmax_scale, dkv_partial,
                       stream);
}

// The warp-specialised backward's dev trace (ops/cuda/attention/flash_bwd_trace.cuh): its calls that
// follow write 16 uint64 per CTA to `records` (device memory, zeroed), null to stop. 1 where this
// library was built with -DFT_FLASH_BWD_TRACE, 0 where not, -1 on error (ft_attn_last_error).
int ft_attn_ws_trace(unsigned long long* records) {
  try {
    return ft::cuda::flash::set_flash_bwd_ws_trace(records) ? 1 : 0;
  } catch (const std::exception& e) {
    g_error = e.what();
    return -1;
  }
}

// Floats of the backward's dq_accum workspace (fp32 or fixed point: flash_attention.h).
long long ft_attn_dq_accum_floats(int B, int T, int H, int D) {
  return ft::cuda::flash::dq_fixed_float_count(static_cast<long long>(B) * H, T, D);
}

// Floats of the dq_accum workspace of one backward call of `variant` in bench_attention.py's
// layout (q, k, v slices of a fused (B, T, 3, H, D) buffer): the stored dS's where the call takes it
// (variant 63, or 4 when its form picks it), else ft_attn_dq_accum_floats. -1 on error.
long long ft_attn_dq_workspace_floats(int B, int T, int H, int D, int causal, float dropout_p, int variant) {
  try {
    AttentionParams p;
    p.B = B, p.T = T, p.H = H, p.H_kv = H, p.D = D;
    p.causal = causal != 0;
    p.dropout = make_dropout_params(PhiloxState{0, 0}, dropout_p);
    const int64_t row = 3LL * H * D;
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = row * T;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = row;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = D;
    const BthdStrides c = contiguous_bthd_strides(T, H, D);
    p.do_batch_stride = c.batch, p.do_row_stride = c.row, p.do_head_stride = c.head;
    using ft::cuda::FlashDeterministicDq;
    const ft::cuda::ScopedFlashDeterministicDq form(variant == 63   ? FlashDeterministicDq::kStoredDs
                                                    : variant == 67 ? FlashDeterministicDq::kOrdered
                                                                    : ft::cuda::flash_deterministic_dq());
    const bool asked = variant == 4 || (variant >= 29 && variant <= 31) || variant == 63;
    const bool stored = ft::cuda::flash_backward_needs(p, asked).stored_ds;
    return stored ? ft::cuda::flash_attention_backward_workspace(p).ds_floats
                  : ft_attn_dq_accum_floats(B, T, H, D);
  } catch (const std::exception& e) {
    g_error = e.what();
    return -1;
  }
}

// Element counts of the FP8 workspaces: sizes[0..2] bytes of quantised q, k, v; sizes[3..5] their
// fp32 scales (one per 64 query rows / 128 keys, T padded to 128).
void ft_attn_fp8_sizes(int B, int T, int H, int D, long long* sizes) {
  const Fp8Operand ops[3] = {Fp8Operand::kQ, Fp8Operand::kK, Fp8Operand::kV};
  for (int i = 0; i < 3; ++i) {
    const auto z = ft::cuda::fp8_quantized_sizes(ops[i], B, H, T, D);
    sizes[i] = z.bytes;
    sizes[3 + i] = z.scales;
  }
}

// FP8 attention forward (ops/attention_fp8.h, kernel level). phase bit 0: quantise q, k, v (bf16,
// (B, T, H, D), sharing the (batch, row, head) strides qkv_strides) into q8/k8/v8 and qs/ks/vs;
// bit 1: attend from them into o (bf16, contiguous (B, T, H, D)). mode: 0 per-tensor scales, 1 per
// tile, 2 per tile with the Hadamard rotation of q and k (signs from seed). amax: one device float
// (per-tensor mode).
int ft_attn_fp8_run(int phase, int mode, const void* q, const void* k, const void* v, void* o, void* q8,
                    void* k8, void* v8, float* qs, float* ks, float* vs, float* amax, int B, int T, int H,
                    int D, const long long* qkv_strides, int causal, float softmax_scale,
                    unsigned long long seed, void* stream) {
  try {
    if (!ft::cuda::flash_sm90a_device()) throw Error("FP8 attention needs sm_90a code and a compute capability 9.0 GPU");
    auto s = static_cast<cudaStream_t>(stream);
    uint32_t signs[8];
    ft::cpu::fp8_hadamard_signs(seed, D, signs);
    const void* src[3] = {q, k, v};
    void* dst[3] = {q8, k8, v8};
    float* scales[3] = {qs, ks, vs};
    if (phase & 1)
      for (int i = 0; i < 3; ++i) {
        Fp8QuantParams p;
        p.x = static_cast<const uint16_t*>(src[i]);
        p.batch_stride = qkv_strides[0], p.row_stride = qkv_strides[1], p.head_stride = qkv_strides[2];
        p.out = static_cast<uint8_t*>(dst[i]);
        p.scales = scales[i];
        p.amax = amax;
        p.per_tensor = mode == 0;
        p.operand = static_cast<Fp8Operand>(i);
        p.hadamard = mode == 2 && p.operand != Fp8Operand::kV;
        for (int w = 0; w < 8; ++w) p.sign_bits[w] = signs[w];
        p.B = B, p.H = H, p.T = T, p.D = D;
        ft::cuda::fp8_quantize(p, s);
      }
    if (phase & 2) {
      Fp8AttentionParams p;
      p.q = static_cast<const uint8_t*>(q8), p.k = static_cast<const uint8_t*>(k8), p.v = static_cast<const uint8_t*>(v8);
      p.q_scale = qs, p.k_scale = ks, p.v_scale = vs;
      p.o = static_cast<uint16_t*>(o);
      const BthdStrides c = contiguous_bthd_strides(T, H, D);
      p.o_batch_stride = c.batch, p.o_row_stride = c.row, p.o_head_stride = c.head;
      p.B = B, p.H = H, p.T = T, p.D = D;
      p.softmax_scale = softmax_scale;
      p.causal = causal != 0;
      ft::cuda::flash_fp8_forward(p, s);
    }
    return 0;
  } catch (const std::exception& e) {
    g_error = e.what();
    return 1;
  }
}

}  // extern "C"
