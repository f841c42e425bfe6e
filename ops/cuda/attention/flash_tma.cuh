// Hopper's asynchronous data movement and warp specialisation for the flash kernels (sm_90a):
// mbarriers, TMA tile loads (cp.async.bulk.tensor), bulk reduce-adds from shared to global memory
// (cp.reduce.async.bulk), named barriers and register reallocation (setmaxnreg).
//
// An mbarrier is a 64-bit word in shared memory that counts arrivals and, for TMA, bytes: a phase
// completes when the expected arrivals have arrived and every byte announced with expect_tx has
// landed. Waiters poll the phase's parity (0, 1, 0, ...), so a ring of stages tracks one parity bit
// per stage and flips it each time round.
// A TMA load copies a box of a tensor described by a CUtensorMap (flash_tma_map.h) into shared
// memory, applies the 128-byte swizzle the wgmma descriptors expect (flash_wgmma.cuh), fills rows
// outside the tensor with zeros, and completes its bytes on an mbarrier. One thread issues it.
// Every function here is for sm_90a code paths only (callers sit under __CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include <cstdint>
#include <cstdio>

#include "ops/cuda/attention/flash_ptx.cuh"

namespace ft::cuda::flash {

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals) : "memory");
}
// Makes mbarrier_init's writes visible to the async proxy (TMA) and to the other threads (with the
// __syncthreads that follows).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_u32(bar))
               : "memory");
}
// One arrival that also announces `bytes` to come from TMA copies completing on this barrier.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
// Whether the phase with this parity has completed; try_wait may suspend the thread for a while
// before it answers no (acquire: what the arrivals released and the TMA bytes are visible after yes).
__device__ __forceinline__ bool mbarrier_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Blocks until the phase with this parity has completed. A mistake in a barrier's count, parity or
// byte total would hang the kernel instead of failing it, so after kMbarrierMaxTries unsuccessful
// tries (4M: at least ~0.1 s even if every try returns at once, where a correct wait lasts
// microseconds; longer where tries suspend the thread) the thread gives up. With kTrap it traps,
// which ends the kernel with an error (cudaErrorLaunchFailure) the caller reports; otherwise it
// exits. The warps that run wgmmas take kTrap = false, because a trap anywhere in their code made
// ptxas spill 56-88 bytes and serialise their wgmmas (C7512); their exit leaves the other roles
// waiting, and those trap. Built with -DFT_MBARRIER_TIMEOUT_PRINT the thread first prints which
// barrier (`what`, `index`: e.g. the tile) timed out: a debugging aid only, since the printf call
// makes ptxas serialise every wgmma of the kernel (C7510) and spill.
constexpr uint32_t kMbarrierMaxTries = 1u << 22;
template <bool kTrap = true>
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity, [[maybe_unused]] const char* what = "",
                                              [[maybe_unused]] int index = 0) {
  for (uint32_t tries = 0; !mbarrier_try_wait(bar, parity);) {
    if (++tries == kMbarrierMaxTries) {
#ifdef FT_MBARRIER_TIMEOUT_PRINT
      printf("[flash_attention] mbarrier wait timed out: %s %d parity %u, block %d thread %d\n", what, index, parity,
             blockIdx.x, threadIdx.x);
#endif
      if constexpr (kTrap) __trap();
      else asm volatile("exit;");
    }
  }
}

// 1-D bulk copies (no tensor map; `bytes` a multiple of 16, both addresses 16-byte aligned), issued
// by one thread. bulk_load: global to shared memory, its bytes completing on bar. bulk_store: shared
// to global memory, tracked like the reduce-adds below (bulk_commit, bulk_wait_read, bulk_wait).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
}

// TMA: the box at coordinates (c0 innermost, .., c3) of a 4-D tensor map into shared memory at dst
// (1024-byte aligned for the 128-byte swizzle), its bytes completing on `bar`.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tensor_map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}
// Prefetches a tensor map (a kernel parameter) into the descriptor cache; optional.
__device__ __forceinline__ void tma_prefetch_map(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tensor_map)) : "memory");
}

// Bulk reduce-add of `bytes` (a multiple of 16; both addresses 16-byte aligned) from shared memory
// into global memory, element by element: fp32 adds (in no fixed order between CTAs, like atomics)
// or 64-bit integer adds (the fixed-point dQ: exact in any order). Completion is tracked per thread
// with bulk_commit / bulk_wait_read.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_reduce_add_u64(unsigned long long* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u64 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until at most N committed bulk groups of this thread still read their shared-memory source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until at most N committed bulk groups of this thread are still incomplete (writes done).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Named barriers (ids 1..15; 0 is __syncthreads): `threads` (a multiple of 32) take part.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrives at a named barrier without waiting (the other `threads` - 32 k wait there with
// named_barrier_sync): hands a turn to the warps that wait.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Register reallocation between warpgroups (setmaxnreg; every warp of a warpgroup executes the same).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

}  // namespace ft::cuda::flash
