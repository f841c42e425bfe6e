// Hopper warpgroup matrix products (wgmma, sm_90a only) for the flash kernels.
//
// A warpgroup is 4 consecutive warps (128 threads). wgmma.m64nNk16 computes D (64 x N, fp32) +=
// A (64 x 16) * B (16 x N) asynchronously: the instruction is issued by the whole warpgroup,
// runs on the tensor cores while the warps go on, and is waited for with wgmma.wait_group.
// B always comes from shared memory through a matrix descriptor, A from registers (wgmma_rs) or
// from shared memory too (wgmma_ss).
//
// Register layouts (PTX ISA, "Register fragments and shared memory matrix layouts" for wgmma):
// warp w of the warpgroup owns rows 16w .. 16w + 15 of A and D, and inside those rows the
// fragments are exactly the mma.sync m16n8k16 ones (flash_ptx.cuh): A = one m16k16 A fragment,
// D = N / 8 accumulator tiles of m16n8. So softmax and masking code written for mma.sync
// accumulators works on wgmma accumulators unchanged, and acc_to_a turns P into an A operand.
//
// Shared-memory layout of every B tile here: rows of 64 16-bit elements (128 bytes), 16-byte
// chunk j of row r stored at chunk j ^ (r % 8) (the 128-byte swizzle), 8-row groups 1024 bytes
// apart, the tile 1024-byte aligned. Such a tile of R rows x 64 elements serves as
//   * a K-major B (rows = the N index, elements = the K index): Q K^T with B = K rows; the k-th
//     16-element step starts 32 bytes further (wgmma_desc_sw128(base + 32 k)), or
//   * an N-major B (rows = the K index, elements = N = 64), read transposed (kTransB): P V with
//     B = V rows; the k-th step of 16 rows starts 16 * 128 = 2048 bytes further.
// Both were checked bit-exact against the mma.sync kernels in session 2
// (bench/attention/dev/wgmma_bwd_experiment.patch).
// Rows wider than 64 elements (head dim 128) are stored as panels: the tile's columns
// 64 p .. 64 p + 63 form panel p, itself such an R-row tile, R * 128 bytes after panel p - 1
// (sw128_panel_offset). A K-major operand's k steps walk panel 0, then panel 1 (k-step kk at panel
// kk / 4, 32 (kk % 4) bytes in); an N-major B of N = 128 is two n64 products, one per panel, or
// one n128 product whose descriptor's leading byte offset is the panel stride
// (wgmma_desc_sw128_lo_panels: for N-major swizzled layouts that field is the distance between
// 64-element groups along N, as in CUTLASS's canonical GMMA layouts; not yet checked on a GPU).
#pragma once

#include <cstdint>

#include "ops/cuda/attention/flash_ptx.cuh"

namespace ft::cuda::flash {

// Descriptor of a 128-byte-swizzled tile (see above), in two 32-bit words. Low word: start address
// >> 4 (bits 0-13), leading byte offset 1 (bit 16; unused with this swizzle). High word, constant:
// stride byte offset 1024 >> 4 (8-row groups), swizzle mode 1 (128 B) at bit 62. A kernel computes
// the low word once and adds stage and k-step offsets (bytes / 16) to it: shared memory ends below
// 256 KB, so the address field never carries out.
__device__ __forceinline__ uint32_t wgmma_desc_sw128_lo(uint32_t smem_addr) {
  return ((smem_addr & 0x3FFFF) >> 4) | (1u << 16);
}
__device__ __forceinline__ uint64_t wgmma_desc_sw128_from_lo(uint32_t lo) {
  return static_cast<uint64_t>(lo) | (static_cast<uint64_t>((1024 >> 4) | (1u << 30)) << 32);
}
// A tile's low word (wgmma_desc_sw128_lo, plus stage and k-step offsets) as that of an N-major tile
// whose N = 128 columns are two panels panel_units (16-byte units) apart: the leading byte offset
// field (bit 16), 1 above, becomes the panel stride.
__device__ __forceinline__ uint32_t wgmma_desc_sw128_lo_to_panels(uint32_t lo, uint32_t panel_units) {
  return lo + ((panel_units - 1u) << 16);
}
// The same from the tile's address, its panels panel_bytes apart.
__device__ __forceinline__ uint32_t wgmma_desc_sw128_lo_panels(uint32_t smem_addr, uint32_t panel_bytes) {
  return wgmma_desc_sw128_lo_to_panels(wgmma_desc_sw128_lo(smem_addr), panel_bytes >> 4);
}
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr) {
  return wgmma_desc_sw128_from_lo(wgmma_desc_sw128_lo(smem_addr));
}

// Byte offset of element (row, col) in such a tile (col < 64).
__device__ __forceinline__ uint32_t sw128_offset(int row, int col) {
  return static_cast<uint32_t>(row * 128 + (((col >> 3) ^ (row & 7)) << 4) + (col & 7) * 2);
}

// The same in a tile of kRows rows x kHeadDim columns split into 64-column panels (see above).
// kHeadDim 64 is sw128_offset itself (the column's sign, which the compiler cannot always rule out,
// would otherwise cost instructions).
template <int kRows, int kHeadDim>
__device__ __forceinline__ uint32_t sw128_panel_offset(int row, int col) {
  if constexpr (kHeadDim == 64) return sw128_offset(row, col);
  else return static_cast<uint32_t>((col >> 6) * (kRows * 128)) + sw128_offset(row, col & 63);
}

// Orders register writes before the wgmmas that read them (and the accumulators' last reads).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes to shared memory (cp.async, st.shared) become visible to the tensor cores'
// async proxy only after this fence (then a barrier for other threads' writes).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// The same between the async proxy's global writes (bulk reduce-adds) and generic-proxy accesses
// that order them for other CTAs (the ordered dQ's counters).
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of an accumulator across an asynchronous wgmma
// (it cannot see that the tensor cores write the register later), and pins the computation of A
// fragments before the wgmma.fence that opens their products: ptxas serialises all wgmmas of a
// kernel (warning C7515) if non-wgmma code defines accumulator registers between a wgmma.fence and
// its commit, which the scheduler otherwise does by sinking the softmax into the next stage.
__device__ __forceinline__ void reg_fence(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void reg_fence(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
template <int N, class T>
__device__ __forceinline__ void reg_fence(T (&d)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) reg_fence(d[j][e]);
}

#define FT_WGMMA_ACC8(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define FT_WGMMA_ACC32 FT_WGMMA_ACC8(0), FT_WGMMA_ACC8(1), FT_WGMMA_ACC8(2), FT_WGMMA_ACC8(3)
#define FT_WGMMA_ACC64 \
  FT_WGMMA_ACC32, FT_WGMMA_ACC8(4), FT_WGMMA_ACC8(5), FT_WGMMA_ACC8(6), FT_WGMMA_ACC8(7)
#define FT_WGMMA_ACC128                                                                         \
  FT_WGMMA_ACC64, FT_WGMMA_ACC8(8), FT_WGMMA_ACC8(9), FT_WGMMA_ACC8(10), FT_WGMMA_ACC8(11), \
      FT_WGMMA_ACC8(12), FT_WGMMA_ACC8(13), FT_WGMMA_ACC8(14), FT_WGMMA_ACC8(15)
#define FT_WGMMA_REGS32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20"
#define FT_WGMMA_REGS64                                                                         \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36"
#define FT_WGMMA_REGS128                                                                          \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "   \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "    \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, " \
  "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68"
// scale-d from a predicate (0: d = a b, ignoring d's old contents -- no zeroing instructions
// while other wgmmas are in flight, which would make ptxas serialise them), no negation of A or
// B, then imm-trans-b. The accumulator operand list comes last (variadic: it holds commas).
#define FT_WGMMA_RS(SHAPE, TYPE, REGS, TRANS, ...)                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" FT_WGMMA_SCALE_D ", 0;\n"             \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", p, 1, 1, " \
               TRANS ";\n}\n"                                                                \
               : __VA_ARGS__                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)       \
               : "memory")

// d (64 x N) = a (64 x 16, this warp's m16k16 A fragment) * B (16 x N, descriptor desc_b; read
// transposed when kTransB) + (scale_d ? d : 0). N = 32, 64 or 128; kBF16 picks bf16 or f16.
template <int N, bool kTransB, bool kBF16>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t desc_b,
                                         int scale_d = 1) {
  static_assert(N == 32 || N == 64 || N == 128, "wgmma_rs: N is 32, 64 or 128");
#define FT_WGMMA_TYPES(SHAPE, REGS, ...)                                               \
  if constexpr (kBF16 && kTransB) FT_WGMMA_RS(SHAPE, "bf16", REGS, "1", __VA_ARGS__);   \
  else if constexpr (kBF16) FT_WGMMA_RS(SHAPE, "bf16", REGS, "0", __VA_ARGS__);         \
  else if constexpr (kTransB) FT_WGMMA_RS(SHAPE, "f16", REGS, "1", __VA_ARGS__);        \
  else FT_WGMMA_RS(SHAPE, "f16", REGS, "0", __VA_ARGS__);
  if constexpr (N == 32) {
#define FT_WGMMA_SCALE_D "21"
    FT_WGMMA_TYPES("m64n32k16", FT_WGMMA_REGS32, FT_WGMMA_ACC32)
#undef FT_WGMMA_SCALE_D
  } else if constexpr (N == 64) {
#define FT_WGMMA_SCALE_D "37"
    FT_WGMMA_TYPES("m64n64k16", FT_WGMMA_REGS64, FT_WGMMA_ACC64)
#undef FT_WGMMA_SCALE_D
  } else {
#define FT_WGMMA_SCALE_D "69"
    FT_WGMMA_TYPES("m64n128k16", FT_WGMMA_REGS128, FT_WGMMA_ACC128)
#undef FT_WGMMA_SCALE_D
  }
#undef FT_WGMMA_TYPES
}

// Both operands from shared memory: desc_a is a K-major (row = M index) 128-byte-swizzled tile like
// the B tiles above, so Q can stay in shared memory instead of being re-read into registers.
#define FT_WGMMA_SS(SHAPE, TYPE, REGS, TRANS, ...)                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" FT_WGMMA_SCALE_D ", 0;\n"               \
               "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPE "." TYPE " " REGS ", p, 1, 1, " TRANS ";\n}\n" \
               : __VA_ARGS__                                                                   \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                        \
               : "memory")
#define FT_WGMMA_SS_REGS64                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33"
#define FT_WGMMA_SS_REGS128                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "   \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "    \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, " \
  "%57, %58, %59, %60, %61, %62, %63}, %64, %65"

// d (64 x N) = A (64 x 16, descriptor desc_a) * B (16 x N, descriptor desc_b) + (scale_d ? d : 0).
// N = 64 or 128. A is K-major (rows = the M index), or with kTransA M-major (rows = the K index,
// 64 M elements a row: a tile written transposed, read as A^T); B K-major, or with kTransB N-major
// (as wgmma_rs's kTransB). Transposed operands are bf16 / f16 only, which is all this file serves.
template <int N, bool kBF16, bool kTransA = false, bool kTransB = false>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t desc_a, uint64_t desc_b, int scale_d = 1) {
  static_assert(N == 64 || N == 128, "wgmma_ss: N is 64 or 128");
#define FT_WGMMA_SS_TRANS(SHAPE, TYPE, REGS, ACC)                                         \
  if constexpr (kTransA && kTransB) FT_WGMMA_SS(SHAPE, TYPE, REGS, "1, 1", ACC);          \
  else if constexpr (kTransA) FT_WGMMA_SS(SHAPE, TYPE, REGS, "1, 0", ACC);                \
  else if constexpr (kTransB) FT_WGMMA_SS(SHAPE, TYPE, REGS, "0, 1", ACC);                \
  else FT_WGMMA_SS(SHAPE, TYPE, REGS, "0, 0", ACC);
  if constexpr (N == 64) {
#define FT_WGMMA_SCALE_D "34"
    if constexpr (kBF16) {
      FT_WGMMA_SS_TRANS("m64n64k16", "bf16", FT_WGMMA_SS_REGS64, FT_WGMMA_ACC64)
    } else {
      FT_WGMMA_SS_TRANS("m64n64k16", "f16", FT_WGMMA_SS_REGS64, FT_WGMMA_ACC64)
    }
#undef FT_WGMMA_SCALE_D
  } else {
#define FT_WGMMA_SCALE_D "66"
    if constexpr (kBF16) {
      FT_WGMMA_SS_TRANS("m64n128k16", "bf16", FT_WGMMA_SS_REGS128, FT_WGMMA_ACC128)
    } else {
      FT_WGMMA_SS_TRANS("m64n128k16", "f16", FT_WGMMA_SS_REGS128, FT_WGMMA_ACC128)
    }
#undef FT_WGMMA_SCALE_D
  }
#undef FT_WGMMA_SS_TRANS
}

#undef FT_WGMMA_SS
#undef FT_WGMMA_SS_REGS128
#undef FT_WGMMA_SS_REGS64
#undef FT_WGMMA_RS
#undef FT_WGMMA_REGS128
#undef FT_WGMMA_REGS64
#undef FT_WGMMA_REGS32
#undef FT_WGMMA_ACC128
#undef FT_WGMMA_ACC64
#undef FT_WGMMA_ACC32
#undef FT_WGMMA_ACC8

// Descriptor-low-word offset (16-byte units) of k step kk (16 elements) of a K-major operand stored
// as 64-column panels panel_units apart: 32 bytes (2 units) a step inside a panel, the next panel
// every 4 steps (the layout at the top of this file).
__device__ __forceinline__ uint32_t sw128_kmajor_kstep(int kk, uint32_t panel_units) {
  return (kk / 4) * panel_units + 2 * (kk % 4);
}

// d = A B^T over kSteps k steps of 16, both operands K-major 128-byte-swizzled tiles (descriptor low
// words a_lo, b_lo) whose 64-column panels are a_panel_units / b_panel_units apart; the first step
// overwrites d (scale-d 0). The caller fences and commits.
template <int N, bool kBF16, int kSteps>
__device__ __forceinline__ void wgmma_ss_kmajor(float (&d)[N / 8][4], uint32_t a_lo, uint32_t a_panel_units,
                                                uint32_t b_lo, uint32_t b_panel_units) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    wgmma_ss<N, kBF16>(d, wgmma_desc_sw128_from_lo(a_lo + sw128_kmajor_kstep(kk, a_panel_units)),
                       wgmma_desc_sw128_from_lo(b_lo + sw128_kmajor_kstep(kk, b_panel_units)), kk > 0);
}

// Columns 64 pn .. 64 pn + 63 of an accumulator of kTiles m16n8 tiles: one n64 product's D.
template <int kTiles>
__device__ __forceinline__ float (&acc_panel(float (&acc)[kTiles][4], int pn))[8][4] {
  return *reinterpret_cast<float(*)[8][4]>(&acc[8 * pn]);
}

// One k step of acc (64 x 64 kPanels) += A B, A from shared memory (desc_a; kTransA: M-major, as
// wgmma_ss) and B an N-major tile read transposed whose low word at this k step is b_lo and whose
// 64-column panels are b_panel_units apart: one n64 product per panel, or with kN128 (two panels) one
// n128 product over both (wgmma_desc_sw128_lo_to_panels). The caller fences and commits.
template <int kPanels, bool kBF16, bool kTransA, bool kN128 = false>
__device__ __forceinline__ void wgmma_ss_transposed_b_step(float (&acc)[8 * kPanels][4], uint64_t desc_a, uint32_t b_lo,
                                                           uint32_t b_panel_units, int scale_d = 1) {
  static_assert(!kN128 || kPanels == 2, "kN128: two panels");
  if constexpr (kN128) {
    wgmma_ss<128, kBF16, kTransA, true>(acc, desc_a, wgmma_desc_sw128_from_lo(wgmma_desc_sw128_lo_to_panels(b_lo, b_panel_units)),
                                        scale_d);
  } else {
#pragma unroll
    for (int pn = 0; pn < kPanels; ++pn)
      wgmma_ss<64, kBF16, kTransA, true>(acc_panel(acc, pn), desc_a, wgmma_desc_sw128_from_lo(b_lo + pn * b_panel_units),
                                         scale_d);
  }
}

// acc (64 x 64 kPanels) += A B, one commit group: A from registers (kSteps k steps of 16), B an
// N-major 128-byte-swizzled tile read transposed (kTransB: 16 rows, 128 units, a k step) whose
// 64-column panels are b_panel_units apart; one n64 product per panel, or with kN128 (two panels)
// one n128 product over both (wgmma_desc_sw128_lo_to_panels). b_lo: B's descriptor low word. The
// caller fences the registers it defined (reg_fence) before this opens the products.
template <int kSteps, int kPanels, bool kBF16, bool kN128 = false>
__device__ __forceinline__ void wgmma_rs_transposed_b(float (&acc)[8 * kPanels][4], uint32_t (&a)[kSteps][4],
                                                      uint32_t b_lo, uint32_t b_panel_units) {
  static_assert(!kN128 || kPanels == 2, "kN128: two panels");
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    if constexpr (kN128) {
      wgmma_rs<128, true, kBF16>(acc, a[kk], wgmma_desc_sw128_from_lo(wgmma_desc_sw128_lo_to_panels(b_lo + 128 * kk, b_panel_units)));
    } else {
#pragma unroll
      for (int pn = 0; pn < kPanels; ++pn)
        wgmma_rs<64, true, kBF16>(acc_panel(acc, pn), a[kk],
                                  wgmma_desc_sw128_from_lo(b_lo + pn * b_panel_units + 128 * kk));
    }
  }
  wgmma_commit();
}

// Rows [row0, row0 + kRows) of one head (rows >= T become zeros) into a 128-byte-swizzled tile of
// kHeadDim / 64 panels (kHeadDim 64 or 128). As load_rows_async (flash_tile.cuh), otherwise.
template <int kRows, int kThreads, int kHeadDim>
__device__ __forceinline__ void load_rows_async_sw128(uint16_t* smem, const uint16_t* base,
                                                      int64_t row_stride, int row0, int T, int tid) {
  static_assert(kHeadDim % 64 == 0, "whole 64-column panels");
  constexpr int kChunksPerRow = kHeadDim / 8, kChunks = kRows * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < (kChunks + kThreads - 1) / kThreads; ++i) {
    const int chunk = tid + i * kThreads;
    if (kChunks % kThreads != 0 && chunk >= kChunks) break;  // 3 warpgroups: a partial last round
    const int r = chunk / kChunksPerRow, j = chunk % kChunksPerRow;
    const int row = row0 + r;
    const bool valid = row < T;
    const uint16_t* src = base + (valid ? static_cast<int64_t>(row) * row_stride : 0) + j * 8;
    cp_async_16(smem_u32(smem) + sw128_panel_offset<kRows, kHeadDim>(r, j * 8), src, valid ? 16 : 0);
  }
}

}  // namespace ft::cuda::flash
