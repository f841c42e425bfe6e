// Per-CTA timestamps of the warp-specialised backward (flash_bwd_ws_kernel.cuh), for a dev build
// with -DFT_FLASH_BWD_TRACE; in any other build every call here compiles to nothing. Sessions 28-29
// estimated the kernel's fixed cost per CTA from total times (bench/attention/NOTES.md); this says
// where a CTA's time goes. Each CTA writes one record of kWsTraceWords words (by blockIdx.x): the
// %globaltimer (ns) at its start; when consumer 0 has K / V and its first Q / dO, is through its first
// tile's products (its dQ partial not yet written), through its last tile and through its dK / dV
// epilogue; when consumer 1 ends and when the dQ writer (or the last sender) ends; the SM it ran on;
// and its tile count, key block and batch * head.
// bench/attention/dev/ws_trace.py runs a backward with the trace on and prints the phases.
#pragma once

#include <cstdint>

namespace ft::cuda::flash {

enum WsTraceWord : int {
  kWsTraceStart,
  kWsTraceKv,
  kWsTraceFirstQ,
  kWsTraceFirstTile,
  kWsTraceLastTile,
  kWsTraceEpilogue,
  kWsTraceConsumer1,
  kWsTraceDq,  // the largest of the dQ roles' end times (a record starts zeroed)
  kWsTraceSm,
  kWsTraceWork,  // tiles | key block << 16 | batch * head << 32
  kWsTraceWords = 16
};

#if defined(FT_FLASH_BWD_TRACE)
// Where the records go (set_flash_bwd_ws_trace, flash_bwd_ws.cu); null: nowhere. Only
// flash_bwd_ws.cu includes this, so a static device variable is that unit's, as the kernel is.
static __device__ unsigned long long* g_ws_trace = nullptr;
__device__ __forceinline__ unsigned long long ws_trace_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void ws_trace_word(int word, unsigned long long value) {
  if (g_ws_trace != nullptr) g_ws_trace[static_cast<int64_t>(blockIdx.x) * kWsTraceWords + word] = value;
}
__device__ __forceinline__ void ws_trace_time(int word) { ws_trace_word(word, ws_trace_now()); }
__device__ __forceinline__ void ws_trace_latest(int word) {
  if (g_ws_trace != nullptr)
    atomicMax(&g_ws_trace[static_cast<int64_t>(blockIdx.x) * kWsTraceWords + word], ws_trace_now());
}
__device__ __forceinline__ unsigned long long ws_trace_sm() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
#else
__device__ __forceinline__ void ws_trace_word(int, unsigned long long) {}
__device__ __forceinline__ void ws_trace_time(int) {}
__device__ __forceinline__ void ws_trace_latest(int) {}
__device__ __forceinline__ unsigned long long ws_trace_sm() { return 0; }
#endif

}  // namespace ft::cuda::flash
