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
// Blocks until the phase with this parity has completed (acquire: what the arrivals released and
// the TMA bytes are visible afterwards).
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
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
