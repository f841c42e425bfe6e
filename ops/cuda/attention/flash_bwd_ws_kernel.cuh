// Flash attention backward with FlashAttention-3's structure (sm_90a, D = 64 and 128): warp specialisation,
// TMA loads into an mbarrier-guarded ring, every product on wgmma, dQ reduced with bulk adds.
//
// Why a new kernel: the shipped backward (flash_bwd_kernel.cuh) is bound by shared-memory traffic
// (every warp re-reads Q and dO), and dropping wgmma into it lost, because one warpgroup waits for
// its own chain S -> P -> dV, dP -> dS -> dK, dQ (bench/attention/NOTES.md, sessions 2 and 4).
// Here the loads run in their own warp, two consumer warpgroups work independently (one's exp and
// dS arithmetic under the other's wgmmas), and dQ leaves through shared memory and one bulk
// reduce-add per tile instead of per-thread REDs.
//
// One CTA = kBlockN = 128 keys [n0, n0 + 128) of one (batch, head), 3 warpgroups:
//   warpgroup 0, the producer (setmaxnreg down to kProducerRegs):
//     warp 0  K and V once (TMA), then for each query tile of kBlockM = 64 rows its Q and dO (TMA)
//             and its lse (in log2 units, +inf past T) and D (regular loads) into a 2-stage ring:
//             q_full[s] completes when a stage has landed, q_empty[s] when both consumers are done
//             with it;
//     warp 1  fp32 dQ: for each tile, waits for the consumers' partials in shared memory (dq_full),
//             adds each into dq_accum with a bulk reduce-add, and frees its buffer once read
//             (dq_empty);
//     warps 1-3, the fixed-point dQ's kConverted form (D = 64 with dropout): for each tile, wait
//             for both partials, sum them, convert the sums to int64 into a staging buffer and send
//             it with one bulk reduce-add; the ordered dQ's kOrdered form: at D = 64 warps 2, 3 sum
//             into fp32 staging buffers and lanes 0, 1 of warp 1 send the sums in key-block order
//             (below); at D = 128, where the consumers leave each tile whole (dQ split by columns,
//             FlashBwdWsTraits::splits_dq), warp 2 hands each tile to its sender; otherwise warp 1
//             sends kSummed's sums and warps 2, 3 exit.
//   warpgroups 1 and 2, the consumers c = 0, 1 (setmaxnreg up to kConsumerRegs): keys
//     n0 + 64 c .. + 63; per query tile, on wgmma (m64 n64 k16; D = 128: S^T and dP^T take eight k
//     steps over two 64-column panels, dV and dK one n64 per panel, dQ one n128 over both, kN128Dq):
//       S^T  = K_c Q^T        A = K_c rows, B = Q rows (both shared memory, K-major)
//       dP^T = V_c dO^T       A = V_c rows, B = dO rows
//       P^T  = exp2(S^T scale log2 e - lse log2 e), masked (partial tiles only)
//       dV_c += (P^T o Z) dO  A = from the accumulators, B = dO read transposed (Z: the dropout mask
//                             times 1 / (1 - p), its keep bits drawn from Philox while S^T and dP^T run)
//       dS^T = P^T o (dP^T o Z - D)
//       dK_c += dS^T Q        A = dS^T from the accumulators, B = Q read transposed
//       dQ_c  = dS_c K_c      A = dS^T staged in shared memory read transposed, B = K_c transposed
//     (The kStoredDs form skips dQ_c: the staged dS^T goes out to global memory instead, warp 1
//     idles, and flash_bwd_ds_dq_kernel.cuh forms dQ afterwards; flash_ds_store.cuh. D = 128's
//     ordered form splits dQ by columns instead: dQ[:, 64 c ..] = dS K[:, 64 c ..] over both
//     consumers' 128 keys; FlashBwdWsTraits::splits_dq.)
//     dQ_c is this consumer's partial over its 64 keys, written to shared memory in dq_accum's own
//     layout (flash_dq_accum.cuh: a 64-row tile is 16 KiB contiguous there, 32 KiB as fixed point),
//     so warp 1 adds a tile with one instruction. fp32: each consumer has its own buffer and warp 1
//     adds both; the consumers never wait for each other. Fixed point (FlashBwdWsTraits::DqForm):
//     kConverted keeps that, the producer warpgroup's idle warps summing and converting; kSummed
//     (without dropout, and at D = 128, where kConverted's buffers do not fit) has consumer 0 leave
//     its fp32 partial in the low halves of the buffer's int64 words (dq_half), consumer 1 add its
//     own, convert the sum and leave it (dq_full), and warp 1 add it once: half the L2 reduce
//     traffic, in two dQ buffers where they fit (D = 128 has room for one). Session 16,
//     H100, bwd ms: D = 64 T = 4096 p = 0 2.435 -> 1.931, T = 16384 8.38 -> 6.44; the same summing
//     made fp32 slower (T = 16384 p = 0.1 6.64 -> 7.54: consumer 1 waits for consumer 0 each tile),
//     so fp32 keeps two adds (bench/attention/NOTES.md).
// kOrdered, FlashAttention-3's deterministic dQ: every tile's sum is added in ascending key-block
// order, so dQ's fp32 bits do not depend on timing. A counter per (batch * head, query tile) says how
// many key blocks have added there; block n sends once it reads the number of non-empty blocks below
// n, waits for its adds to complete and counts itself. Waiting is rare because of the order of the
// work. The CTAs launch in ascending key blocks (grouped_block_order: block n - 1 of a head starts
// before block n, so no CTA waits for one that has not started and there is no deadlock; CUDA does
// not promise that blocks start in index order, but they do, and the older ordered kernels rely on
// it too). And in this form every CTA walks its query tiles downwards from the last, so blocks n - 1
// and n reach a tile at the same step of their walks (upwards, n - 1 would get there two tiles after
// n). dK and dV are then summed in the other order, so their bits differ from the other forms' by
// rounding. Dense or causal, block 0 stores where the others add (ws_first_block_stores_dq), so
// dq_accum is not zeroed first.
// kPersistent (the atomic dQ, and D = 64's ordered one; flash_bwd_ws.cu says when): one CTA per SM,
// each taking work items (the key blocks above, in the non-persistent grid's order) from a global
// counter until none is left, so that an item's dQ tail and dK / dV epilogue overlap the next item's
// first tiles; at D = 64 with two K / V buffers, so that an item's K and V load while the one before
// finishes (ws_kv_buffers). The producer takes the
// items and writes each beside its first Q / dO stage; consumer 0 passes it on to the dQ roles beside
// the item's first dQ tile (tell_dq_tile); every role walks an item's query tiles itself. A session 30
// trace of the non-persistent CTAs (H200, T = 1024, D = 64) put 1.2 us in the K / V wait, 0.5-0.7 in
// the first Q / dO wait, 1 in the gap between CTAs and 2-5 in the dQ tail, of 18-20 a CTA.
// Not covered yet (the launcher sends these calls to the other kernels): the document mask, D = 256,
// strides TMA cannot describe. Spill stores at D = 128 (ptxas, session 34; none at D = 64): with
// dropout the atomic form 28 bytes, the fixed point 38, the stored dS 4; the ordered (split) forms 20
// without dropout and 64 with it; the persistent forms 36-68. A 3-stage Q / dO ring measured level
// with 2 at D = 64 (session 34, bench/attention/NOTES.md). The tile shapes are session 15's first
// guesses (written without a GPU), not yet tuned.
#pragma once

#include <cmath>

#include "ops/attention_params.h"
#include "ops/cuda/attention/flash_bwd_trace.cuh"
#include "ops/cuda/attention/flash_dq_accum.cuh"
#include "ops/cuda/attention/flash_dq_order.cuh"
#include "ops/cuda/attention/flash_ds_store.cuh"
#include "ops/cuda/attention/flash_mma.cuh"
#include "ops/cuda/attention/flash_ptx.cuh"
#include "ops/cuda/attention/flash_tile.cuh"
#include "ops/cuda/attention/flash_tma.cuh"
#include "ops/cuda/attention/flash_tma_map.h"
#include "ops/cuda/attention/flash_wgmma.cuh"

namespace ft::cuda::flash {

// How a launch of the kernel forms dQ: fp32 bulk adds in any order (kAtomic), int64 fixed-point ones
// (kFixedPoint), none but the stored dS^T (kStoredDs), or fp32 bulk adds in ascending key-block order
// (kOrdered). The last three are the deterministic backward's forms.
enum class WsDq { kAtomic, kFixedPoint, kStoredDs, kOrdered };

// kHeadDim 64 or 128: rows of one or two 64-column panels (flash_wgmma.cuh); a tile of R rows keeps
// panel p at p * R * 128 bytes. kKvBuffers_: K / V buffers, 2 in the persistent kernel (a work item's
// K and V load while the one before finishes in the other buffer).
template <int kHeadDim_, int kKvBuffers_ = 1>
struct FlashBwdWsTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kPanels = kHeadDim / 64;
  static constexpr int kBlockM = 64;   // query rows per tile (one consumer wgmma's N for S^T)
  static constexpr int kBlockN = 128;  // keys per CTA, 64 per consumer
  static constexpr int kStages = 2;    // Q / dO ring
  static constexpr int kNThreads = 384;
  // Register split (128 x producer + 256 x consumer = 384 x 168, what the CTA is given): D = 128's
  // consumers hold dK and dV at 64 registers each, so they take all but 24 of the producer's. At
  // D = 64 the producer keeps 56 for the kConverted dQ converter's unrolled loop (40 spilled there
  // at 2 unrolled, and unrolled 4 it is 1-4% faster than not unrolled; the consumers do not spill at
  // 224; session 18).
  static constexpr int kProducerRegs = kHeadDim == 64 ? 56 : 24;
  static constexpr int kConsumerRegs = kHeadDim == 64 ? 224 : 240;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 384 * 168, "registers of one CTA per SM");
  static constexpr int kKvBuffers = kKvBuffers_;
  // D = 128: dQ (N = D) as one n128 wgmma a k step over both panels of K (the descriptor's leading
  // byte offset the panel stride) instead of one n64 per panel, so its A (dS, shared memory) is read
  // once. cuDNN issues n128 products here (ncu, H200, session 33, T = 4096, p = 0: our 16.2 M HGMMA
  // against its 11.4 M, with 2.8x its R2UR). kN128DkDv does the same for dK and dV; with both,
  // ncu measured the atomic form 1.6% faster at T = 4096, p = 0 (1415.4 against 1438.2 us), level
  // with dropout and at T = 1024, and the stored-dS form 5.4% slower (1178.6 against 1118.2 us).
  static constexpr bool kN128Dq = kHeadDim == 128, kN128DkDv = false;
  static constexpr int kKvBytes = kBlockN * kHeadDim * 2;         // K (or V) of the CTA
  static constexpr int kKvBufferBytes = 2 * kKvBytes;             // one buffer: K, then V
  static constexpr int kQBytes = kBlockM * kHeadDim * 2;          // one stage of Q (or dO)
  // Panel strides in descriptor units (16 bytes): a K / V tile's, a Q / dO stage's.
  static constexpr uint32_t kKvPanelUnits = kBlockN * 128 / 16, kQPanelUnits = kBlockM * 128 / 16;
  static constexpr int kDsBytes = kBlockN * kBlockM * 2;          // dS^T: 128 keys x 64 queries
  static_assert(kBlockM == kDsTileQueries && kBlockN == kDsTileKeys, "kStoredDs: one tile of flash_ds_store.cuh");
  // One dQ tile: 64 x kHeadDim fp32, or as int64 fixed point (the summed form: consumer 0's fp32
  // partial in the low half of each word, until consumer 1 replaces the word with the sum's).
  static constexpr int kDqBytesF32 = kBlockM * kHeadDim * 4, kDqBytesFixed = 2 * kDqBytesF32;
  // Offsets (bytes) from the 1024-byte-aligned base; swizzled tiles first (1024-byte multiples).
  static constexpr int kOffK = 0, kOffV = kKvBytes, kOffQ = kKvBuffers * kKvBufferBytes, kOffDo = kOffQ + kStages * kQBytes,
                       kOffDs = kOffDo + kStages * kQBytes, kOffDq = kOffDs + kDsBytes;
  static constexpr int kSmemLimit = 227 * 1024;
  // kOrdered's staging buffers, each with its own sender, so that one tile's wait for its adds
  // overlaps the next one's. H200, session 28, bwd ms, two / four senders (four polled the counter
  // before the sums were in): D = 64 T = 4096 p = 0 1.597 / 1.679, T = 16384 5.526 / 5.893; level at
  // T = 1024 and with dropout.
  static constexpr int kOrderedStaging = 2;
  // kv_full[kKvBuffers], kv_empty[kKvBuffers], q_full[kStages], q_empty[kStages], then dq_half[2],
  // dq_full[4], dq_empty[4], staged[kOrderedStaging], staging_free[kOrderedStaging]; after them the
  // items (kPersistent: 1 int a Q / dO stage, 4 a dQ tile slot) and kOrdered's sends (4 ints each).
  static constexpr int kNumBars = 2 * kKvBuffers + 2 * kStages + 2 + 4 + 4 + 2 * kOrderedStaging;
  // The item of dQ tile t in slot t % kDqTileSlots: written by consumer 0 as it starts tile t, when tile
  // t - kDqTileSlots's reader is done (it has released the dQ buffers of tile t - 3; two per consumer).
  static constexpr int kDqTileSlots = 4;
  static constexpr int kTileInts = kStages + 4 * kDqTileSlots + 4 * kOrderedStaging;
  static constexpr int kRowsAndBarsBytes = 2 * kStages * kBlockM * 4 /* lse, D */ + kNumBars * 8 + kTileInts * 4;
  // How dQ leaves the consumers:
  //   kF32        fp32: one buffer per consumer, one bulk add each (not deterministic);
  //   kConverted  two fp32 buffers per consumer (the consumers never wait for each other); the
  //               producer warpgroup's warps 1-3 sum a tile's two partials, convert the sums to int64
  //               into one of two staging buffers and send it with one bulk add;
  //   kSummed     consumer 0 leaves its partial in the low halves of int64 words, consumer 1 adds its
  //               own and converts (two buffers of kDqBytesFixed, or one where two do not fit);
  //   kStoredDs   no dQ here: each consumer bulk-stores its half of the tile's dS^T (flash_ds_store.cuh)
  //               and flash_bwd_ds_dq_kernel.cuh forms dQ = dS K afterwards. The dQ region holds a
  //               second dS^T buffer instead, so a tile's store still reads one while the next is
  //               written;
  //   kOrdered    two fp32 buffers per consumer; warps 2, 3 sum a tile's partials into one of two fp32
  //               staging buffers, and a sender per staging buffer (lanes 0, 1 of warp 1) adds it with
  //               one bulk add once the tile's counter says every key block below this one has added
  //               its own (FlashAttention-3's deterministic mode; the kernel's header says how the
  //               order is kept without waiting).
  // dq_form: the fixed point takes kConverted with dropout where it fits (D = 64), kSummed otherwise.
  // H100, session 18, D = 64 bwd ms, kConverted / kSummed, same call: p = 0.1 T = 1024 1.028 /
  // 1.055, 4096 2.290 / 2.316, 16384 7.338 / 7.578; p = 0 0.869 / 0.856, 2.020 / 1.920, 6.459 /
  // 6.388 (bench/attention/NOTES.md).
  enum class DqForm { kF32, kConverted, kSummed, kStoredDs, kOrdered };
  // D = 128's ordered dQ is split by columns, as FlashAttention-3 forms dQ there: consumer c forms
  // columns 64 c .. + 63 of the tile's dQ over all 128 keys of the CTA (dS from both consumers' dS^T,
  // which meet at one 256-thread barrier a tile), so each tile leaves whole in one 32 KiB buffer both
  // consumers fill, and its accumulator is 32 registers instead of 64. So the ordered dQ needs no
  // summers or staging, and fits at D = 128. dS^T has two buffers (tile parity; the dQ region holds
  // the second): the barrier of tile t - 1 is passed only after every warp's products of tile t - 2,
  // so no other wait guards the overwrite. The atomic form keeps its two partials: split, it measured
  // 6-20% slower without dropout at T <= 4096 (the barrier holds the consumers in lockstep), and with
  // the product one tile behind and the buffers guarded by mbarriers instead, slower still (H200,
  // session 33; bench/attention/NOTES.md).
  static constexpr bool splits_dq(DqForm f) { return kHeadDim == 128 && f == DqForm::kOrdered; }
  // The split form's register split (producer / consumers): 40 / 232 with dropout, 24 / 240 without.
  // At 232 ptxas serialises the wgmmas of the forms without dropout (C7512); at 240 it does not, and
  // the producer warpgroup's senders and announcer spill 20-68 bytes instead. ncu, H200, session 34,
  // p = 0, ws kernel us, 24 / 40: T = 8192 3086.0 / 3397.2, T = 16384 5235.4 / 6177.8 and 5184.5 /
  // 6091.7, T = 1024 581.7 / 605.5, but T = 4096 2550.6 / 2323.4 (kAuto takes this form only past the
  // stored dS's workspace cap, which at T <= 4096 takes a very large batch). With dropout 24 spills
  // 70-110 bytes and measured slower: T = 4096 2569.3 / 2365.7, T = 16384 6448.9 / 6385.3.
  static constexpr int split_producer_regs(bool dropout) { return dropout ? 40 : 24; }
  static constexpr int kStagingBuffers = 2;  // kConverted
  static constexpr int smem_with(DqForm f, int buffers) {
    const int dq = splits_dq(f)              ? kDsBytes + 2 * kDqBytesF32
                   : f == DqForm::kF32       ? 2 * kDqBytesF32
                   : f == DqForm::kConverted ? 4 * kDqBytesF32 + kStagingBuffers * kDqBytesFixed
                   : f == DqForm::kOrdered   ? 4 * kDqBytesF32 + kOrderedStaging * kDqBytesF32
                   : f == DqForm::kStoredDs  ? kDsBytes
                                             : buffers * kDqBytesFixed;
    return 1024 /* alignment */ + kOffDq + dq + kRowsAndBarsBytes;
  }
  // dQ buffers: kSummed's and the split forms' (shared by the consumers), the other forms' per consumer.
  static constexpr int dq_buffers(DqForm f) {
    return f == DqForm::kSummed                                                   ? (smem_with(f, 2) <= kSmemLimit ? 2 : 1)
           : splits_dq(f) || f == DqForm::kConverted || f == DqForm::kOrdered ? 2
                                                                                  : 1;
  }
  // Where the dQ buffers start: after the second dS^T buffer in the split forms.
  static constexpr int off_dq(DqForm f) { return kOffDq + (splits_dq(f) ? kDsBytes : 0); }
  static constexpr int dq_bytes(DqForm f) { return f == DqForm::kSummed ? kDqBytesFixed : kDqBytesF32; }
  static constexpr int smem_bytes(DqForm f) { return smem_with(f, dq_buffers(f)); }
  static constexpr bool fits(DqForm f) { return smem_bytes(f) <= kSmemLimit; }
  static constexpr int kOffStaging = kOffDq + 4 * kDqBytesF32;  // kConverted, kOrdered
  static constexpr int off_rows(DqForm f) { return smem_bytes(f) - 1024 - kRowsAndBarsBytes; }  // lse, D
  static constexpr int off_bars(DqForm f) { return off_rows(f) + 2 * kStages * kBlockM * 4; }
  template <WsDq kDq, bool kDropout>
  static constexpr DqForm dq_form() {
    if (kDq == WsDq::kStoredDs) return DqForm::kStoredDs;
    if (kDq == WsDq::kOrdered) return DqForm::kOrdered;
    if (kDq == WsDq::kAtomic) return DqForm::kF32;
    return kDropout && fits(DqForm::kConverted) ? DqForm::kConverted : DqForm::kSummed;
  }
};

// kPersistent: the producer alone decides which work item comes next (a global counter) and writes
// it beside the item's first Q / dO stage; the consumers read it there and consumer 0 passes it on to
// the dQ roles beside the item's first dQ tile. Every role walks an item's query tiles itself. This
// item (or batch * head) says that none is left.
constexpr int kWsNoItem = -1;
// K / V buffers of the kernel: two in the persistent form at D = 64, so that an item's K and V land
// while the one before finishes; one otherwise (D = 128's 208 KB leave no room for a second).
constexpr int ws_kv_buffers(int head_dim, bool persistent) { return persistent && head_dim == 64 ? 2 : 1; }

// A work item of the backward: key block n_block (keys n0 ..) of batch b, head h (bh = b H + h).
struct WsItem {
  int b, h, bh, n_block, n0;
};

// kDq: WsDq above. dq_semaphore (kOrdered): one counter per (batch * head, 64-query tile), zeroed.
// kPersistent: a CTA per SM, each taking work items (key blocks, numbered in grouped_block_order as
// the other launch's blockIdx.x) from the zeroed *work_counter until none is left, with two K / V
// buffers. Items are taken in ascending order, so the ordered dQ's waits still only look back: the
// lowest unfinished item's CTA is working on it, and every item it waits for is lower.
template <int kHeadDim, bool kBF16, bool kDropout, WsDq kDq, bool kPersistent>
__global__ void __launch_bounds__(FlashBwdWsTraits<kHeadDim>::kNThreads, 1)
    flash_bwd_ws_kernel(const __grid_constant__ FlashBwdTmaMaps maps, const AttentionParams p, int heads_per_group,
                        int* dq_semaphore, int* work_counter) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Kt = FlashBwdWsTraits<kHeadDim, ws_kv_buffers(kHeadDim, kPersistent)>;
  using DqForm = typename Kt::DqForm;
  constexpr bool kFixedDq = kDq == WsDq::kFixedPoint, kStoreDs = kDq == WsDq::kStoredDs;
  constexpr bool kOrderDq = kDq == WsDq::kOrdered;
  constexpr DqForm kForm = Kt::template dq_form<kDq, kDropout>();
  static_assert(Kt::fits(kForm), "shared memory");
  constexpr int BM = Kt::kBlockM, BN = Kt::kBlockN, D = Kt::kHeadDim, kStages = Kt::kStages, kPanels = Kt::kPanels;
  using DqLayout = DqAccumLayout<D>;

  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  uint8_t* smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);  // swizzled tiles: 1 KiB aligned
  uint8_t* sK = smem + Kt::kOffK;    // K / V buffer kb: + kb * Kt::kKvBufferBytes
  uint8_t* sV = smem + Kt::kOffV;
  uint8_t* sQ = smem + Kt::kOffQ;    // kStages x kQBytes
  uint8_t* sdO = smem + Kt::kOffDo;  // kStages x kQBytes
  uint8_t* sdS = smem + Kt::kOffDs;  // dS^T: rows = keys, 64 queries a row (128-byte swizzle); kStoreDs: 2 of them
  uint8_t* sDq = smem + Kt::off_dq(kForm);  // kDqBuffers (per consumer, but kSummed's and kSplitDq's) x dq_bytes
  constexpr int kDqBuffers = Kt::dq_buffers(kForm);
  constexpr bool kSumDq = kForm == DqForm::kSummed, kConvertDq = kForm == DqForm::kConverted;
  constexpr bool kSplitDq = Kt::splits_dq(kForm);  // dQ by columns (D = 128's ordered dQ; the traits)
  constexpr int kBarConsumers = 4;                  // kSplitDq: both consumers (1, 2: each one; 3: kConverted's)
  constexpr int kProducerRegs = kSplitDq ? Kt::split_producer_regs(kDropout) : Kt::kProducerRegs;
  constexpr int kConsumerRegs = kSplitDq ? (384 * 168 - 128 * kProducerRegs) / 256 / 8 * 8 : Kt::kConsumerRegs;
  static_assert(128 * kProducerRegs + 256 * kConsumerRegs == 384 * 168, "check_register_split's average");
  constexpr int kConverters = 96;       // kConverted: warps 1-3
  constexpr int kOrderedSummers = 64;   // kOrdered: warps 2, 3
  // The dQ buffer of tile `it` for consumer c, and how many tiles used it before (its phase).
  auto dq_buffer = [](int it, int c) { return kSumDq || kSplitDq ? it % kDqBuffers : c * kDqBuffers + it % kDqBuffers; };
  auto dq_uses = [](int it) { return it / kDqBuffers; };
  // kConverted, kOrdered: a producer summer's share of tile it's sum of the two consumers' fp32
  // partials (x + y = y + x: the bits do not depend on which came first). Summer warp `sw` of
  // `summer_warps` takes chunk groups g = sw, sw + summer_warps, ... (chunks 32 g .. + 31 of the
  // tile, floats 128 g ..) and hands this lane's float4 of each sum to store(g, sum).
  auto sum_dq_partials = [&](int it, int sw, int summer_warps, int lane, auto store) {
    const float4* part0 = reinterpret_cast<const float4*>(sDq + dq_buffer(it, 0) * Kt::kDqBytesF32);
    const float4* part1 = reinterpret_cast<const float4*>(sDq + dq_buffer(it, 1) * Kt::kDqBytesF32);
#pragma unroll 4
    for (int g = sw; g < Kt::kBlockM * Kt::kHeadDim / 128; g += summer_warps) {
      const float4 x = part0[32 * g + lane], y = part1[32 * g + lane];
      store(g, make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w));
    }
  };
  float* sLse = reinterpret_cast<float*>(smem + Kt::off_rows(kForm));  // kStages x BM, log2 units
  float* sDsum = sLse + kStages * BM;                                        // kStages x BM
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + Kt::off_bars(kForm));
  constexpr int kKvBuffers = Kt::kKvBuffers;
  uint64_t* kv_full = bars;                   // [kKvBuffers]: an item's K and V have landed
  uint64_t* kv_empty = kv_full + kKvBuffers;  // [kKvBuffers]: the consumers' epilogue is done with them
  uint64_t* q_full = kv_empty + kKvBuffers;   // [kStages]
  uint64_t* q_empty = q_full + kStages;       // [kStages]
  uint64_t* dq_half = q_empty + kStages;      // [2], by dq_buffer: consumer 0's partial is in (kSumDq)
  uint64_t* dq_full = dq_half + 2;            // [4], by dq_buffer: the tile's dQ (or sum) is in
  uint64_t* dq_empty = dq_full + 4;           // [4], by dq_buffer: the writer has read it
  constexpr int kOrderedStaging = Kt::kOrderedStaging;
  uint64_t* staged = dq_empty + 4;                       // kOrdered, by staging buffer: it holds a tile's sums
  uint64_t* staging_free = staged + kOrderedStaging;     // kOrdered, by staging buffer: its sender is done
  int* sTile = reinterpret_cast<int*>(staging_free + kOrderedStaging);  // [kStages]: an item's first stage's item
  // [kDqTileSlots][4]: the item (bh, b, h, n_block; bh = kWsNoItem: none left) whose first dQ tile
  // is tile t, in slot t % kDqTileSlots (kPersistent; tell_dq_tile).
  int* sDqTile = sTile + kStages;
  int* sSend = sDqTile + 4 * Kt::kDqTileSlots;  // kOrdered [kOrderedStaging][4]: adds before, bh, query tile, stores (block 0)

  // The warp (and so warpgroup) index: warp_index_uniform lets the consumers' wgmma descriptors live
  // in uniform registers -- which changes how ptxas allocates the rest, for better or worse by form.
  // H200, ncu, ws kernel us, shuffle / threadIdx.x / 32 (sessions 33-34, bench/attention/NOTES.md):
  // ordered dQ D = 64 T = 1024 p = 0.1 701.6 / 776.4 (and 708.3 / 786.1), p = 0 541.0 / 559.7,
  // T = 4096 p = 0.1 level, D = 128 T = 16384 p = 0 5149.2 / 5209.2; stored dS D = 128 T = 4096 p = 0.1 1476.0 / 1504.9, p = 0 level; but the atomic dQ D = 128
  // p = 0.1 T = 1024 630.6 / 582.7, T = 4096 2030.0 / 1850.0, T = 16384 7222.5 / 6461.9 (its persistent
  // form spills 116 bytes against 68), D = 64 p = 0 T = 4096 1699.3 / 1665.4, T = 16384 6515.6 / 6319.7,
  // p = 0.1 T = 1024 732.6 / 714.6, T = 16384 9361.6 / 9296.0 (T = 4096 2489.6 / 2520.6). So the atomic
  // form keeps threadIdx.x / 32.
  const int tid = threadIdx.x, lane = tid % 32;
  const int warp = kDq == WsDq::kAtomic ? tid / 32 : warp_index_uniform(), wg = warp / 4;
  const int T = p.T;
  // BN keys per work item, BM-row query tiles; the load helpers of KeyBlock are not used (TMA loads).
  using Block = KeyBlock<BM, BN, D, D, 128, false>;
  auto key_block = [&](int item) { return Block(p, heads_per_group, false, item); };
  const int m_blocks = (T + BM - 1) / BM, n_blocks = (T + BN - 1) / BN;
  const int n_items = n_blocks * p.B * p.H;
  DropoutParams drop = p.dropout;
  if constexpr (kDropout) resolve_dropout_offset(drop);  // graph replay: before any dropout_bits
  // An item's batch, head, keys (n0 = BN n_block), without KeyBlock's pointers (the consumers keep these
  // across their tiles).
  auto ws_item = [&](int item) {
    const BlockOrder order = grouped_block_order(item, n_blocks, p.B * p.H, heads_per_group);
    return WsItem{order.bh / p.H, order.bh % p.H, order.bh, order.rank, order.rank * BN};
  };
  // An item's query tiles, in the order every role walks them by itself (only the item comes through
  // shared memory, once per item): ascending, or (kOrderDq) descending, so that key block n reaches each
  // tile about when block n - 1, started before it, adds there (the header's kOrdered note). Tiles a
  // block-sparse mask leaves empty are skipped (as KeyBlock's next_query_tile; its pointers are not
  // kept here).
  auto m_begin = [&](const WsItem& w) { return p.causal ? w.n0 / BM : 0; };
  auto tile_left = [&](const WsItem& w, int m) { return kOrderDq ? m >= m_begin(w) : m < m_blocks; };
  auto live_tile = [&](const WsItem& w, int m) {  // the first non-empty tile from m on, in walk order
    for (; tile_left(w, m); m += kOrderDq ? -1 : 1)
      if (attention_tile_kind<false>(p, w.b, m * BM, min(m * BM + BM, T), w.n0, min(w.n0 + BN, T)) != kTileEmpty) break;
    return m;
  };
  auto first_tile = [&](const WsItem& w) { return live_tile(w, kOrderDq ? m_blocks - 1 : m_begin(w)); };
  auto next_tile = [&](const WsItem& w, int m) { return live_tile(w, kOrderDq ? m - 1 : m + 1); };
  // The dQ roles' walk over dQ tiles 0, 1, ... (w, m: the next tile's item and query tile). Without
  // kPersistent it is the CTA's item's walk (dq_walk_has: a tile is left); with it, the slot of each
  // item's first tile says which item it is, or that none is left (dq_walk_item, once the tile's dQ
  // buffers are full). dq_walk_advance moves on and says whether that ended the item.
  struct DqWalk {
    WsItem w;
    int m;
    bool in_item;
  };
  auto dq_walk_start = [&] {
    DqWalk d{WsItem{}, 0, false};
    if constexpr (!kPersistent) d.w = ws_item(blockIdx.x), d.m = first_tile(d.w), d.in_item = true;
    return d;
  };
  auto dq_walk_has = [&](const DqWalk& d) { return kPersistent || tile_left(d.w, d.m); };
  auto dq_walk_item = [&](DqWalk& d, int t) {
    if (kPersistent && !d.in_item) {
      const int* slot = sDqTile + 4 * (t % Kt::kDqTileSlots);
      if (slot[0] == kWsNoItem) return false;
      d.w = WsItem{slot[1], slot[2], slot[0], slot[3], slot[3] * BN};
      d.m = first_tile(d.w), d.in_item = true;
    }
    return true;
  };
  auto dq_walk_advance = [&](DqWalk& d) {
    d.m = next_tile(d.w, d.m);
    const bool ended = !tile_left(d.w, d.m);
    if (kPersistent && ended) d.in_item = false;
    return ended;
  };

  if (tid == 0) {
    for (int kb = 0; kb < kKvBuffers; ++kb) {
      mbarrier_init(&kv_full[kb], 1);
      mbarrier_init(&kv_empty[kb], 256);  // every consumer thread, after its epilogue
    }
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&q_full[s], 32);    // the producer warp's 32 lanes (lane 0's arrival carries the TMA bytes)
      mbarrier_init(&q_empty[s], 256);  // every consumer thread
    }
    for (int i = 0; i < (kStoreDs ? 0 : kSumDq || kSplitDq ? 1 : 2) * kDqBuffers; ++i) {
      if (kSumDq) mbarrier_init(&dq_half[i], 128);  // the threads of the consumer that wrote the partial
      mbarrier_init(&dq_full[i], kSplitDq ? 256 : 128);  // the threads of the consumer(s) that wrote it
      // the dQ writer (kOrdered split: its sender), or every converter (summer) thread
      mbarrier_init(&dq_empty[i], kConvertDq ? kConverters : kOrderDq && !kSplitDq ? kOrderedSummers : 1);
    }
    for (int s = 0; s < (kOrderDq ? kOrderedStaging : 0); ++s) {
      mbarrier_init(&staged[s], kSplitDq ? 1 : kOrderedSummers);  // (kSplitDq: lane 0 of the announcer)
      mbarrier_init(&staging_free[s], 1);  // its sender
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles only meet at mbarriers
  if (!kPersistent && tid == 0) {  // the dev trace (flash_bwd_trace.cuh; nothing in other builds)
    ws_trace_time(kWsTraceStart);
    ws_trace_word(kWsTraceSm, ws_trace_sm());
  }

  if (wg == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (warp == 0) {
      // Producer: per work item its K and V (TMA, into K / V buffer `use % kKvBuffers`), then its query
      // tiles' Q, dO, lse and D into the ring, the item itself beside its first stage; an item without
      // a tile (block-sparse) gets one stage without loads, and after the last item one says so.
      if (lane == 0) {
        tma_prefetch_map(&maps.q);
        tma_prefetch_map(&maps.dout);
      }
      int it = 0;  // stages handed out
      // One stage: query tile m of `item` (an item's first stage: tell its index) with that tile's rows
      // from `blk` (the item's) unless null.
      auto hand_out = [&](int item, bool first, int m, const Block* blk) {
        const int s = it % kStages;
        // The consumers are done with stage s's last tile.
        mbarrier_wait(&q_empty[s], ((it / kStages) & 1) ^ 1, "q_empty (producer), stage", it);
        const int m0 = m * BM;
        if (blk != nullptr) {
          // lse in log2 units (-inf, a row that sees no key: +inf, so its P row is exp2(-inf) = 0; past
          // T: +inf too, and D = 0, so padding rows contribute nothing).
#pragma unroll
          for (int i = 0; i < BM / 32; ++i) {
            const int r = m0 + lane + 32 * i;
            const float lse = r < T ? blk->lse[r] : -INFINITY;
            sLse[s * BM + lane + 32 * i] = lse == -INFINITY ? INFINITY : lse * kLog2e;
            sDsum[s * BM + lane + 32 * i] = r < T ? blk->dsum[r] : 0.f;
          }
        }
        if (lane == 0 && first) sTile[s] = item;
        if (lane == 0 && blk != nullptr) {
          mbarrier_arrive_expect_tx(&q_full[s], 2 * Kt::kQBytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn) {
            tma_load_4d(sQ + s * Kt::kQBytes + pn * BM * 128, &maps.q, &q_full[s], 64 * pn, m0, blk->h, blk->b);
            tma_load_4d(sdO + s * Kt::kQBytes + pn * BM * 128, &maps.dout, &q_full[s], 64 * pn, m0, blk->h, blk->b);
          }
        } else {
          mbarrier_arrive(&q_full[s]);
        }
        ++it;
      };
      int item = blockIdx.x;
      for (int use = 0;; ++use) {
        const Block blk = key_block(item);  // (its lse and D rows)
        const WsItem w{blk.b, blk.h, blk.bh, blk.n_block, blk.n0};
        const int kb = use % kKvBuffers;
        if (lane == 0) {
          // The buffer's item before is done (its epilogue staged dK and dV there).
          mbarrier_wait(&kv_empty[kb], ((use / kKvBuffers) & 1) ^ 1, "kv_empty (producer), item", item);
          const int hk = attention_kv_head(p, w.h);
          mbarrier_arrive_expect_tx(&kv_full[kb], 2 * Kt::kKvBytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn) {  // one box per 64-column panel
            tma_load_4d(sK + kb * Kt::kKvBufferBytes + pn * BN * 128, &maps.k, &kv_full[kb], 64 * pn, w.n0, hk, w.b);
            tma_load_4d(sV + kb * Kt::kKvBufferBytes + pn * BN * 128, &maps.v, &kv_full[kb], 64 * pn, w.n0, hk, w.b);
          }
        }
        int m = first_tile(w);
        if (!tile_left(w, m)) hand_out(item, true, 0, nullptr);
        for (bool first = true; tile_left(w, m); m = next_tile(w, m), first = false) hand_out(item, first, m, &blk);
        if constexpr (!kPersistent) break;  // (a loop the compiler sees run once: no loop-carried state)
        // The next item, taken now that this one's last tile is handed out (the consumers are one or two
        // tiles from it), so that its K and V land before they get there. Taken at this item's start, it
        // waited for the whole item while later ones ran, and with the ordered dQ those wait for it (3-4x
        // slower). Taken only once the consumers were done with the last tile, T = 1024 without dropout
        // lost 4-5 of the 8% the persistent form gains there (H200, session 30).
        int next = 0;
        if (lane == 0) next = static_cast<int>(gridDim.x) + atomicAdd(work_counter, 1);
        item = __shfl_sync(0xffffffffu, next, 0);
        if (item >= n_items) break;
      }
      if constexpr (kPersistent) hand_out(kWsNoItem, true, 0, nullptr);
    } else if constexpr (kConvertDq) {
      // dQ converter, warps 1-3: per tile, once both consumers' fp32 partials are in, their sums
      // (sum_dq_partials) as int64 fixed point into a staging buffer, which thread 32 sends with one
      // bulk reduce-add. In the summed form consumer 1 did this work on its own path
      // (bench/attention/NOTES.md, session 18).
      const int ct = tid - 32, cw = ct / 32;  // converter thread 0..95, warp 0..2
      constexpr int kBarConvert = 3;          // named barriers 1, 2: the consumers'
      DqFixedAdder fixed(n_blocks);  // each dQ element gets n_blocks terms (one per key block)
      DqWalk walk = dq_walk_start();
      for (int it = 0; dq_walk_has(walk); ++it) {
        const int i0 = dq_buffer(it, 0), i1 = dq_buffer(it, 1);
        const uint32_t phase = dq_uses(it) & 1;
        auto* stage_words =
            reinterpret_cast<unsigned long long*>(smem + Kt::kOffStaging + (it % Kt::kStagingBuffers) * Kt::kDqBytesFixed);
        // The staging buffer is free once the bulk add that last read it has (the newer one may
        // still read).
        if (ct == 0) bulk_wait_read<Kt::kStagingBuffers - 1>();
        mbarrier_wait(&dq_full[i0], phase, "dq_full (dQ converter, consumer 0), tile", it);
        mbarrier_wait(&dq_full[i1], phase, "dq_full (dQ converter, consumer 1), tile", it);
        if (!dq_walk_item(walk, it)) break;
        const int bh = walk.w.bh, m = walk.m;
        named_barrier_sync(kBarConvert, kConverters);  // thread 0's bulk_wait_read covers them all
        // Group g's sums as words 128 g + lane + 32 e.
        sum_dq_partials(it, cw, kConverters / 32, lane, [&](int g, float4 sum) {
          const float v[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) stage_words[128 * g + lane + 32 * e] = fixed.to_word(v[e]);
        });
        // This thread's part of both partials is read (each thread arrives for its own reads, which
        // racecheck follows; one arrival after the barrier below is as correct, but it reported
        // write-after-read hazards there).
        mbarrier_arrive(&dq_empty[i0]);
        mbarrier_arrive(&dq_empty[i1]);
        fence_proxy_async_smem();                      // the words are visible to the bulk add ...
        named_barrier_sync(kBarConvert, kConverters);  // ... once every converter has written its own
        if (ct == 0) {
          bulk_reduce_add_u64(dq_fixed_words<D>(p.dq_accum, bh, T) + static_cast<int64_t>(m) * BM * D, stage_words,
                              Kt::kDqBytesFixed);
          bulk_commit();
        }
        if (dq_walk_advance(walk)) {  // the item's head: flag an out-of-range term
          fixed.flag_overflow(dq_fixed_flag<D>(p.dq_accum, p.B * p.H, bh, T));
          fixed.overflow = false;
        }
      }
      if (ct == 0) bulk_wait<0>();
    } else if constexpr (kOrderDq) {
      // The ordered dQ: warps 2 and 3 sum each tile's two fp32 partials into a staging buffer, as
      // kConverted does without the conversion; lanes 0 and 1 of warp 1 send the sums, lane L the
      // tiles it with it % 2 == L from staging buffer L. Once a tile's sums are in, its sender waits
      // until the tile's counter shows every non-empty key block below this one, adds the sums with
      // one bulk reduce-add, waits for the adds to complete and counts itself. One sender per staging
      // buffer, so that a tile's round trips to L2 (the counter, then the adds) overlap the next
      // tile's; the summers never wait for the counters. (Polling the counter before the sums were
      // in, or with relaxed loads and one fence after, measured slower: bench/attention/NOTES.md.)
      // The non-empty key blocks below this one at the walk's tile (a ballot of the warp where the mask
      // is block-sparse): the count its sender waits for.
      auto blocks_before = [&](const DqWalk& w) {
        return dq_blocks_below<false>(p, w.w.b, w.m * BM, min(w.m * BM + BM, T), w.w.n_block, BN, lane);
      };
      // The send slot of staging (kSplitDq: dQ) buffer s, which its sender reads: that count, the tile
      // (bh, query tile), and whether it stores rather than adds (dense or causal block 0, which is
      // every tile's first, so that dq_accum is not zeroed); bh = kWsNoItem says no tile is left.
      auto post_send = [&](int s, int before, const DqWalk& w, bool first_block_stores) {
        int* send = sSend + 4 * s;
        send[0] = before, send[1] = w.w.bh, send[2] = w.m, send[3] = w.w.n_block == 0 && first_block_stores;
      };
      auto post_end = [&](int s) { sSend[4 * s + 1] = kWsNoItem; };
      if (warp == 1) {
        if (lane < kOrderedStaging) {
          for (int it = lane;; it += kOrderedStaging) {
            mbarrier_wait(&staged[lane], (it / kOrderedStaging) & 1, "staged (dQ sender), tile", it);
            const int* send = sSend + 4 * lane;  // post_send's
            const int before = send[0], bh = send[1], m = send[2];
            if (bh == kWsNoItem) break;
            int* counter = dq_semaphore + static_cast<int64_t>(bh) * m_blocks + m;
            while (ld_acquire_gpu(counter) != before) {
            }
            fence_proxy_async_global();  // the adds below come after those the counter shows
            float* tile = dq_head_floats<D>(p.dq_accum, bh, T) + static_cast<int64_t>(m) * BM * D;
            // The sums, or (kSplitDq) the tile itself in dQ buffer `lane` (= dq_buffer of its tiles).
            const uint8_t* sums = kSplitDq ? sDq + lane * Kt::kDqBytesF32 : smem + Kt::kOffStaging + lane * Kt::kDqBytesF32;
            if (send[3]) bulk_store(tile, sums, Kt::kDqBytesF32);
            else bulk_reduce_add_f32(tile, sums, Kt::kDqBytesF32);
            bulk_commit();
            if constexpr (kSplitDq) {  // the consumers' buffer is free once read
              bulk_wait_read<0>();
              mbarrier_arrive(&dq_empty[lane]);
            }
            bulk_wait<0>();              // this CTA's adds are done in global memory ...
            fence_proxy_async_global();  // ... and ordered before the count that releases them
            red_release_gpu_add(counter, 1);
            if constexpr (!kSplitDq) mbarrier_arrive(&staging_free[lane]);
          }
        }
      } else if constexpr (kSplitDq) {
        // The announcer, warp 2 (warp 3 idles): the consumers leave each tile whole in its dQ buffer,
        // so nothing is summed; per tile it counts the adds that come first there and hands the tile to
        // its sender. It writes a tile's send slot once the tile's buffer is full, which the consumers
        // filled only after that buffer's sender had read the slot's tile before (dq_empty).
        if (warp == 2) {
          const bool first_block_stores = ws_first_block_stores_dq(p);
          DqWalk walk = dq_walk_start();
          int it = 0;
          for (; dq_walk_has(walk); ++it) {
            const int s = dq_buffer(it, 0);
            int before = 0;
            const bool known = walk.in_item;
            if (known) before = blocks_before(walk);
            mbarrier_wait(&dq_full[s], dq_uses(it) & 1, "dq_full (dQ announcer), tile", it);
            if (!dq_walk_item(walk, it)) break;
            if (!known) before = blocks_before(walk);
            if (lane == 0) {
              post_send(s, before, walk, first_block_stores);
              mbarrier_arrive(&staged[s]);
            }
            dq_walk_advance(walk);
          }
          // No tile left: each sender's next slot says so, once it has read the one before.
          for (int k = 0; k < kOrderedStaging; ++k) {
            const int s_end = dq_buffer(it + k, 0);
            mbarrier_wait(&dq_empty[s_end], (dq_uses(it + k) & 1) ^ 1, "dq_empty (dQ announcer, end)", it + k);
            if (lane == 0) {
              post_end(s_end);
              mbarrier_arrive(&staged[s_end]);
            }
          }
        }
      } else {
        const int sw = warp - 2;  // summer warp 0, 1
        const bool first_block_stores = ws_first_block_stores_dq(p);
        // Staging buffer s is free for tile it (its sender is done with tile it - kOrderedStaging).
        auto wait_staging = [&](int it, int s) {
          mbarrier_wait(&staging_free[s], ((it / kOrderedStaging) & 1) ^ 1, "staging_free (dQ summer), tile", it);
        };
        DqWalk walk = dq_walk_start();
        int it = 0;
        for (; dq_walk_has(walk); ++it) {
          const int s = it % kOrderedStaging, i0 = dq_buffer(it, 0), i1 = dq_buffer(it, 1);
          const uint32_t phase = dq_uses(it) & 1;
          // The adds that come first there, for the sender: counted while the partials are still
          // coming where the tile is known.
          int before = 0;
          const bool known = walk.in_item;
          if (sw == 0 && known) before = blocks_before(walk);
          wait_staging(it, s);
          mbarrier_wait(&dq_full[i0], phase, "dq_full (dQ summer, consumer 0), tile", it);
          mbarrier_wait(&dq_full[i1], phase, "dq_full (dQ summer, consumer 1), tile", it);
          if (!dq_walk_item(walk, it)) break;
          if (sw == 0 && !known) before = blocks_before(walk);
          float4* sums = reinterpret_cast<float4*>(smem + Kt::kOffStaging + s * Kt::kDqBytesF32);
          sum_dq_partials(it, sw, kOrderedSummers / 32, lane, [&](int g, float4 sum) { sums[32 * g + lane] = sum; });
          if (sw == 0 && lane == 0) post_send(s, before, walk, first_block_stores);
          mbarrier_arrive(&dq_empty[i0]);  // this thread's part of both partials is read
          mbarrier_arrive(&dq_empty[i1]);
          fence_proxy_async_smem();  // the sums are visible to the bulk add
          mbarrier_arrive(&staged[s]);
          dq_walk_advance(walk);
        }
        // No tile left: each sender's next staging buffer says so.
        for (int k = 0; k < kOrderedStaging; ++k) {
          const int s_end = (it + k) % kOrderedStaging;
          wait_staging(it + k, s_end);
          if (sw == 0 && lane == 0) post_end(s_end);
          mbarrier_arrive(&staged[s_end]);
        }
      }
    } else if (!kStoreDs && warp == 1 && lane == 0) {
      // dQ writer: bulk reduce-adds into the tile's 64 rows of dq_accum (one per consumer, or one
      // for their sum).
      DqWalk walk = dq_walk_start();
      for (int it = 0; dq_walk_has(walk); ++it) {
        const uint32_t phase = dq_uses(it) & 1;
        const int i0 = dq_buffer(it, 0);
        mbarrier_wait(&dq_full[i0], phase, "dq_full (dQ writer), tile", it);
        if (!dq_walk_item(walk, it)) break;
        // DqLayout: 64 rows are contiguous
        const int64_t tile_floats = (static_cast<int64_t>(walk.w.bh) * dq_accum_rows(T) + walk.m * BM) * D;
        for (int c = 0; c < (kSumDq ? 1 : 2); ++c) {  // (kSplitDq is the ordered dQ's: its senders above)
          const int i = dq_buffer(it, c);
          if (c > 0) mbarrier_wait(&dq_full[i], phase, "dq_full (dQ writer), tile", it);
          const uint8_t* src = sDq + i * Kt::dq_bytes(kForm);
          if constexpr (kFixedDq) {
            bulk_reduce_add_u64(reinterpret_cast<unsigned long long*>(p.dq_accum) + tile_floats, src, Kt::kDqBytesFixed);
          } else {
            bulk_reduce_add_f32(p.dq_accum + tile_floats, src, Kt::kDqBytesF32);
          }
          bulk_commit();
          bulk_wait_read<0>();  // the buffer may be overwritten once read
          mbarrier_arrive(&dq_empty[i]);
        }
        dq_walk_advance(walk);
      }
      bulk_wait<0>();
    }
    if (warp == 1 && lane < 2) ws_trace_latest(kWsTraceDq);  // the dQ writer, or kOrdered's senders
    return;
  }

  // Consumers.
  setmaxnreg_inc<kConsumerRegs>();
  const int c = wg - 1;                 // keys n0 + 64 c .. + 63
  const int wq = warp % 4;              // this warp's 16 of the consumer's 64 keys (accumulator rows)
  const int key_row0 = 64 * c + 16 * wq;  // the warp's first key, local to the CTA
  const float scale_log2 = p.softmax_scale * kLog2e;
  const float keep_scale = kDropout ? drop.keep_scale : 1.f;
  // Descriptor low words of the stage-0 Q and dO tiles and of dS^T (flash_wgmma.cuh; the item's K and V
  // below).
  const uint32_t q_desc = wgmma_desc_sw128_lo(smem_u32(sQ));
  const uint32_t do_desc = wgmma_desc_sw128_lo(smem_u32(sdO));
  const uint32_t ds_desc = wgmma_desc_sw128_lo(smem_u32(sdS + 64 * c * 128));
  const uint32_t ds_desc_all = wgmma_desc_sw128_lo(smem_u32(sdS));  // kSplitDq: both consumers' keys
  constexpr uint32_t kStageUnits = Kt::kQBytes / 16;
  // kSummed: each dQ element gets n_blocks terms (one per key block: the two consumers' sum).
  [[maybe_unused]] DqFixedAdder fixed(n_blocks);
  // kStoreDs: thread 0 of each consumer stores its 64 keys' rows of each tile's dS^T (8 KiB) from one
  // of two buffers (tile parity).
  const bool ds_storer = kStoreDs && wq == 0 && lane == 0;
  // The consumer whose dQ goes into a tile's buffer first: kSummed's partial writer (the header's dQ
  // forms), in the other forms each consumer into its own.
  auto dq_partial_writer = [&](int tile) { return !kSumDq ? c : kDropout ? tile & 1 : 0; };
  // dQ columns this consumer forms: all, or (kSplitDq) 64 c .. + 63.
  constexpr int kDqCols = kSplitDq ? 64 : D;
  // kPersistent: the item (bh = kWsNoItem: none left) whose first dQ tile is tile t, for the dQ
  // roles, who read it once the dQ buffers of tile t are full: consumer 0 writes it as it starts the
  // tile (so before its dq_full or, kSummed, dq_half arrival), or the consumer that posts the end.
  auto tell_dq_tile = [&](int t, const WsItem& w) {
    int* slot = sDqTile + 4 * (t % Kt::kDqTileSlots);
    if (wq == 0 && lane == 0) slot[0] = w.bh, slot[1] = w.b, slot[2] = w.h, slot[3] = w.n_block;
  };

  float acc_dk[D / 8][4], acc_dv[D / 8][4];
  // acc += A B over the tile's 64 queries, one commit group: A from registers (P^T o Z or dS^T,
  // 64 keys x 16 queries a k step), B = the stage's dO or Q rows read transposed (b_desc: its low word).
  auto accumulate_rs = [&](float(&acc)[D / 8][4], uint32_t(&a)[BM / 16][4], uint32_t b_desc) {
    reg_fence(a);
    wgmma_rs_transposed_b<BM / 16, kPanels, kBF16, Kt::kN128DkDv>(acc, a, b_desc, Kt::kQPanelUnits);
  };
  const bool tracer = !kPersistent && tid == 128;  // consumer 0's first thread records its times (dev trace)
  // The current item and its K / V buffer. Without kPersistent the CTA's only item is blockIdx.x, set
  // here once, so that its values stay loop-invariant as before the persistent form (set per item
  // they cost the D = 128 kernels 150-350 bytes of spill).
  WsItem cur = kPersistent ? WsItem{} : ws_item(blockIdx.x);
  int kb = 0, item_tiles = 0;
  // Descriptor low words (flash_wgmma.cuh; 16-byte units) of this consumer's 64 rows of K and V in
  // buffer 0 (buffer kb: kb * kKvBufferBytes further). K-major operands step 32 bytes per k step (2
  // units) inside a panel and a panel every 4 steps (sw128_kmajor_kstep); transposed ones 16 rows (2048
  // bytes, 128 units) per k step, with the N panels kKvPanelUnits / kQPanelUnits apart.
  const uint32_t k_desc0 = wgmma_desc_sw128_lo(smem_u32(sK + 64 * c * 128));
  const uint32_t k_desc0_dq = wgmma_desc_sw128_lo(smem_u32(sK + c * BN * 128));  // kSplitDq: panel c, all keys
  const uint32_t v_desc0 = wgmma_desc_sw128_lo(smem_u32(sV + 64 * c * 128));
  // An item's start (its K and V landed, dK and dV zeroed) and end (finish_item, below). Without
  // kPersistent both stay outside the tile loop, which ends at the item's last tile, as before the
  // persistent form: inside it they cost the D = 128 kernels about 300 bytes of spill.
  auto start_item = [&](int use) {
    item_tiles = 0;
    zero_fragments(acc_dk);
    zero_fragments(acc_dv);
    mbarrier_wait<false>(&kv_full[kb], (use / kKvBuffers) & 1, "kv_full (consumer), item use", use);
    if (tracer) ws_trace_time(kWsTraceKv);
  };
  auto finish_item = [&] {
    // The item is done: its dK (times the softmax scale) and dV through this consumer's own rows of
    // its K / V buffer (no one else reads them), then 16-byte stores; rows past T are skipped.
    const int b = cur.b, bh = cur.bh, n0 = cur.n0;
    if constexpr (kSumDq) {  // its head's overflow flag
      fixed.flag_overflow(dq_fixed_flag<D>(p.dq_accum, p.B * p.H, bh, T));
      fixed.overflow = false;
    }
    if (tracer) {
      ws_trace_time(kWsTraceLastTile);
      using u64 = unsigned long long;
      ws_trace_word(kWsTraceWork, static_cast<u64>(item_tiles) | static_cast<u64>(cur.n_block) << 16 |
                                      static_cast<u64>(bh) << 32);
    }
    uint16_t* dk = static_cast<uint16_t*>(p.dk) + b * p.dk_batch_stride + cur.h * p.dk_head_stride;
    uint16_t* dv = static_cast<uint16_t*>(p.dv) + b * p.dv_batch_stride + cur.h * p.dv_head_stride;
    uint8_t* sK_item = sK + kb * Kt::kKvBufferBytes;
    uint8_t* sV_item = sV + kb * Kt::kKvBufferBytes;
    auto at_k = [&](int r, int col) {
      return reinterpret_cast<uint16_t*>(sK_item + sw128_panel_offset<BN, D>(64 * c + r, col));
    };
    auto at_v = [&](int r, int col) {
      return reinterpret_cast<uint16_t*>(sV_item + sw128_panel_offset<BN, D>(64 * c + r, col));
    };
    // Every warp of this consumer is done reading K_c, V_c (dQ, S^T, dP^T); kSplitDq: of both, as
    // either's dQ reads all of K's rows.
    if constexpr (kSplitDq) named_barrier_sync(kBarConsumers, 256);
    else named_barrier_sync(1 + c, 128);
    stage_rows<kBF16, D>(acc_dk, p.softmax_scale, 16 * wq, at_k, lane);
    stage_rows<kBF16, D>(acc_dv, 1.f, 16 * wq, at_v, lane);
    __syncwarp();
    store_staged_rows<16, D>(dk, p.dk_row_stride, 16 * wq, n0 + 64 * c, T, at_k, lane);
    store_staged_rows<16, D>(dv, p.dv_row_stride, 16 * wq, n0 + 64 * c, T, at_v, lane);
    if (tracer) ws_trace_time(kWsTraceEpilogue);
    if (!kPersistent && tid == 256) ws_trace_time(kWsTraceConsumer1);
    fence_proxy_async_smem();  // this thread's staging is ordered before the next TMA load there
    mbarrier_arrive(&kv_empty[kb]);
  };
  if constexpr (!kPersistent) start_item(0);
  int tile_no = 0;  // tiles with products so far: the dQ buffers' and the stored dS^T's count
  for (int it = 0, use = 0;;) {  // over the items (without kPersistent: one)
    // (The wait for a tile's stage ends the tile before it: with the wait at the top of a tile loop, as
    // before the persistent form, the non-persistent kernels measured 2% slower still; H200, ncu.)
    int s = it % kStages;
    mbarrier_wait<false>(&q_full[s], (it / kStages) & 1, "q_full (consumer), stage", it);
    if constexpr (kPersistent) {
      const int item = sTile[s];  // beside the item's first stage
      if (item == kWsNoItem) break;
      cur = ws_item(item), kb = use % kKvBuffers;
      start_item(use++);
    }
    int m = first_tile(cur);
    if (!tile_left(cur, m)) {
      mbarrier_arrive(&q_empty[s]);  // an item without a tile (one stage without loads): dK = dV = 0
      ++it;
    }
    while (tile_left(cur, m)) {
      const int b = cur.b, bh = cur.bh, n0 = cur.n0;
      const int m0 = m * BM, m1 = min(m0 + BM, T);
      const uint32_t stage = s * kStageUnits;
      const uint32_t k_desc = k_desc0 + kb * (Kt::kKvBufferBytes / 16), v_desc = v_desc0 + kb * (Kt::kKvBufferBytes / 16);
      if (tracer && item_tiles == 0) ws_trace_time(kWsTraceFirstQ);
      // kPersistent: the dQ roles learn the item at its first tile (the slot is free: Kt::kDqTileSlots).
      if (kPersistent && !kStoreDs && c == 0 && item_tiles == 0) tell_dq_tile(tile_no, cur);

      // S^T and dP^T, two commit groups (the first overwrites its accumulator: scale-d 0).
      float acc_s[BM / 8][4], acc_dp[BM / 8][4];
      wgmma_fence();
      wgmma_ss_kmajor<BM, kBF16, D / 16>(acc_s, k_desc, Kt::kKvPanelUnits, q_desc + stage, Kt::kQPanelUnits);
      wgmma_commit();
      wgmma_ss_kmajor<BM, kBF16, D / 16>(acc_dp, v_desc, Kt::kKvPanelUnits, do_desc + stage, Kt::kQPanelUnits);
      wgmma_commit();
      // Dropout keep bits of this warp's 16 keys x 64 queries (bit 4 nb + e: element [nb][e]), drawn
      // while the products run.
      uint32_t keep = 0;
      if constexpr (kDropout) keep = transposed_tile_keep_bits<BM>(drop, bh, m0, n0 + key_row0, lane);
      // dV is issued as soon as P^T is ready and dS^T computed while it runs, except at D = 128 with
      // dropout, which has no registers for that (dK and dV are 64 each, the keep bits more; ptxas
      // spilled 148 bytes): it waits for both products, forms dS^T and then P^T o Z (each freeing its
      // fp32 accumulator) and issues dV with dK (40 bytes of spill).
      constexpr bool kOverlapDv = D == 64 || !kDropout;
      wgmma_wait<kOverlapDv ? 1 : 0>();  // S^T (and, kOverlapDv, dP^T may still run)
      reg_fence(acc_s);
      if constexpr (!kOverlapDv) reg_fence(acc_dp);

      // Accumulator element acc[nb][e]: key n0 + key_row0 + lane / 4 + 8 (e >> 1), query
      // m0 + 8 nb + 2 (lane % 4) + (e & 1).
      const int key_lo = n0 + 64 * c, key_hi = min(key_lo + 64, T);
      if (attention_tile_kind<false>(p, b, m0, m1, key_lo, key_hi) != kTileFull || key_lo + 64 > T || m0 + BM > T) {
        if (mask_is_causal_only<false>(p)) {
          // mask_scores' causal test in this tile's key-major form, hoisted per key: a key's queries
          // are [first, T) (first: the key itself if causal; T, so none, for a key past T), so one
          // unsigned compare a score where mask_scores' form takes three (flash_tile.cuh,
          // mask_is_causal_only).
          unsigned first[2], count[2];
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int key = n0 + key_row0 + (lane >> 2) + 8 * half;
            const int lo = key >= T ? T : (p.causal ? key : 0);
            first[half] = static_cast<unsigned>(lo), count[half] = static_cast<unsigned>(T - lo);
          }
          const int query0 = m0 + 2 * (lane & 3);
#pragma unroll
          for (int nb = 0; nb < BM / 8; ++nb)
#pragma unroll
            for (int e = 0; e < 4; ++e)
              if (static_cast<unsigned>(query0 + 8 * nb + (e & 1)) - first[e >> 1] >= count[e >> 1])
                acc_s[nb][e] = -INFINITY;
        } else {
          mask_scores<false>(acc_s, p, b, [&](int nb, int e) {
            return make_int2(m0 + 8 * nb + 2 * (lane & 3) + (e & 1), n0 + key_row0 + (lane >> 2) + 8 * (e >> 1));
          });
        }
      }
      const float* lse_s = sLse + s * BM;
      const float* dsum_s = sDsum + s * BM;
#pragma unroll
      for (int nb = 0; nb < BM / 8; ++nb) {
        const float2 l2 = *reinterpret_cast<const float2*>(lse_s + 8 * nb + 2 * (lane & 3));
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[nb][e] = fast_exp2(fmaf(acc_s[nb][e], scale_log2, -((e & 1) ? l2.y : l2.x)));
      }
      auto zeta = [&](int nb, int e) {  // Z: the dropout mask times 1 / (1 - p)
        if constexpr (kDropout) return ((keep >> (4 * nb + e)) & 1u) ? keep_scale : 0.f;
        return keep_scale;
      };
      // P^T o Z as A fragments (for dV += (P^T o Z) dO).
      uint32_t pf[BM / 16][4];
      auto make_pf = [&] {
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk) {
          float pz[2][4];
#pragma unroll
          for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int e = 0; e < 4; ++e) pz[t][e] = acc_s[2 * kk + t][e] * zeta(2 * kk + t, e);
          acc_to_a<kBF16>(pf[kk], pz[0], pz[1]);
        }
      };
      if constexpr (kOverlapDv) {
        make_pf();
        accumulate_rs(acc_dv, pf, do_desc + stage);
        wgmma_wait<1>();  // dP^T (dV may still run)
        reg_fence(acc_dp);
      }

      // dS^T = P^T o (dP^T o Z - D), into acc_dp; its A fragments for dK, and dS^T into shared memory
      // for dQ.
#pragma unroll
      for (int nb = 0; nb < BM / 8; ++nb) {
        const float2 d2 = *reinterpret_cast<const float2*>(dsum_s + 8 * nb + 2 * (lane & 3));
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc_dp[nb][e] = acc_s[nb][e] * (acc_dp[nb][e] * zeta(nb, e) - ((e & 1) ? d2.y : d2.x));
      }
      uint32_t dsf[BM / 16][4];
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk) acc_to_a<kBF16>(dsf[kk], acc_dp[2 * kk], acc_dp[2 * kk + 1]);
      if constexpr (!kOverlapDv) {
        make_pf();
        accumulate_rs(acc_dv, pf, do_desc + stage);
      }
      // The previous tile's dQ product read every warp's rows of dS^T; each warp waited for it, but
      // only for itself, so the warps meet before overwriting them (a review's hardening; FA3 does the
      // same with one dS stage). kStoreDs: this buffer's last bulk store (tile it - 2) has read it.
      // kSplitDq: the barrier of the tile before covers that (the traits' splits_dq).
      const int ds_buffer = kStoreDs || kSplitDq ? (tile_no & 1) : 0;
      uint8_t* sdS_tile = sdS + ds_buffer * Kt::kDsBytes;
      if (ds_storer) bulk_wait_read<1>();
      if constexpr (!kSplitDq) named_barrier_sync(1 + c, 128);
      // dsf[kk][2 half + t]: rows key_row0 + lane / 4 + 8 half, queries 16 kk + 8 t + 2 (lane % 4), +1.
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          *reinterpret_cast<uint32_t*>(sdS_tile + sw128_offset(key_row0 + (lane >> 2) + 8 * (r & 1),
                                                               16 * kk + 8 * (r >> 1) + 2 * (lane & 3))) = dsf[kk][r];
      fence_proxy_async_smem();  // the stores are visible to the tensor cores ...
      // ... once every warp of this consumer (kSplitDq: of both, whose keys dQ sums over) has made them
      if constexpr (kSplitDq) named_barrier_sync(kBarConsumers, 256);
      else named_barrier_sync(1 + c, 128);
      if (ds_storer) {
        uint8_t* ds_out = reinterpret_cast<uint8_t*>(p.dq_accum) + ds_tile_offset(bh, m, cur.n_block, T, p.causal);
        bulk_store(ds_out + c * (Kt::kDsBytes / 2), sdS_tile + c * (Kt::kDsBytes / 2), Kt::kDsBytes / 2);
        bulk_commit();
      }
      if constexpr (kPanels == 1) {
        accumulate_rs(acc_dk, dsf, q_desc + stage);
      } else {
        // D = 128: dK from dS^T in shared memory (K-major: rows = keys, 16 queries a k step), so its A
        // fragments need no registers while it runs.
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BM / 16; ++kk)
          wgmma_ss_transposed_b_step<kPanels, kBF16, false, Kt::kN128DkDv>(
              acc_dk, wgmma_desc_sw128_from_lo(ds_desc + ds_buffer * (Kt::kDsBytes / 16) + 2 * kk), q_desc + stage + 128 * kk,
              Kt::kQPanelUnits);
        wgmma_commit();
      }
      float acc_dq[kDqCols / 8][4];
      if constexpr (kSplitDq) {
        // Columns 64 c .. of dS K over the CTA's 128 keys: A = dS^T (both halves, this tile's buffer)
        // read transposed, B = K's panel c, 16 keys a k step.
        const uint32_t ds_lo = ds_desc_all + ds_buffer * (Kt::kDsBytes / 16);
        const uint32_t k_lo = k_desc0_dq + kb * (Kt::kKvBufferBytes / 16);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk)
          wgmma_ss<64, kBF16, true, true>(acc_dq, wgmma_desc_sw128_from_lo(ds_lo + 128 * kk),
                                          wgmma_desc_sw128_from_lo(k_lo + 128 * kk), kk > 0);
        wgmma_commit();
      } else if constexpr (!kStoreDs) {
#pragma unroll
        for (int kk = 0; kk < 64 / 16; ++kk)  // over this consumer's 64 keys
          wgmma_ss_transposed_b_step<kPanels, kBF16, true, Kt::kN128Dq>(acc_dq, wgmma_desc_sw128_from_lo(ds_desc + 128 * kk),
                                                                        k_desc + 128 * kk, Kt::kKvPanelUnits, kk > 0);
        wgmma_commit();
      }
      wgmma_wait<0>();
      if constexpr (!kStoreDs) reg_fence(acc_dq);
      reg_fence(acc_dk);
      reg_fence(acc_dv);
      mbarrier_arrive(&q_empty[s]);  // this consumer has read stage s (Q, dO, lse, D) for the last time
      if (tracer && item_tiles == 0) ws_trace_time(kWsTraceFirstTile);
      ++item_tiles;

      if constexpr (!kStoreDs) {  // (kStoreDs: dQ comes from the stored dS, flash_bwd_ds_dq_kernel.cuh)
        // dQ into buffer i in dq_accum's layout (rows 16 wq .. of the tile: m16 = wq). Summed: both
        // consumers' accumulators have the same layout, so each element is written and then read back
        // by the same thread index of the two warpgroups: the mbarriers are the only ordering needed.
        const int i = dq_buffer(tile_no, c);
        const uint32_t phase = dq_uses(tile_no) & 1;
        uint8_t* stage_dq = sDq + i * Kt::dq_bytes(kForm);
        // Element e of chunk j: an fp32 slot (the fixed point's: the low half of its int64 word).
        auto slot = [&](int j, int e) -> float* {
          const int64_t chunk = DqLayout::chunk(wq, j, lane);  // floats within the 64-row tile
          if constexpr (kSumDq)
            return reinterpret_cast<float*>(reinterpret_cast<unsigned long long*>(stage_dq) +
                                            DqLayout::fixed_word(chunk, lane) + 32 * e);
          return reinterpret_cast<float*>(stage_dq) + chunk + e;
        };
        // Summed: one consumer writes its partial, the other adds its own and converts. With dropout they
        // take turns (tile parity), so neither is always the one that waits; without, consumer 0 always
        // writes. H200, session 17, fixed-point bwd ms, taking turns / not, same call: D = 64 p = 0.1
        // T = 4096 2.306 / 2.461, T = 16384 7.61 / 8.11 (T = 1024 level); D = 128 p = 0.1 T = 4096 1.940 /
        // 1.985; p = 0 0.4-1.7% slower at both head dims (T = 1024 0.810 / 0.796, D = 128 T = 16384
        // 5.33 / 5.24). fp32 addition commutes: the dQ bits are the same either way (dq_bits.py: 0 of
        // every element differ).
        const int partial_writer = dq_partial_writer(tile_no);
        if (c == partial_writer) {
          // Once the writer has read this buffer's previous tile.
          mbarrier_wait<false>(&dq_empty[i], phase ^ 1, "dq_empty (consumer), tile", tile_no);
          // (kSplitDq: this consumer's 8 of the tile's 16 column groups.)
#pragma unroll
          for (int j = 0; j < kDqCols / 8; ++j) {
            if constexpr (kSumDq) {
#pragma unroll
              for (int e = 0; e < 4; ++e) *slot(j, e) = acc_dq[j][e];
            } else {
              const int jd = kSplitDq ? 8 * c + j : j;
              *reinterpret_cast<float4*>(slot(jd, 0)) = make_float4(acc_dq[j][0], acc_dq[j][1], acc_dq[j][2], acc_dq[j][3]);
            }
          }
          if constexpr (kSumDq) {
            mbarrier_arrive(&dq_half[i]);
          } else {
            fence_proxy_async_smem();  // visible to the bulk copy that reads it
            mbarrier_arrive(&dq_full[i]);
          }
        } else if constexpr (kSumDq) {
          mbarrier_wait<false>(&dq_half[i], phase, "dq_half (finishing consumer), tile", tile_no);
#pragma unroll
          for (int j = 0; j < D / 8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)  // a + b = b + a: the order does not matter
              *reinterpret_cast<unsigned long long*>(slot(j, e)) = fixed.to_word(*slot(j, e) + acc_dq[j][e]);
          fence_proxy_async_smem();  // visible to the bulk copy that reads it
          mbarrier_arrive(&dq_full[i]);
        }
      }
      ++tile_no;
      ++it;
      m = next_tile(cur, m);
      if (!tile_left(cur, m)) break;
      s = it % kStages;
      mbarrier_wait<false>(&q_full[s], (it / kStages) & 1, "q_full (consumer), stage", it);
    }
    if constexpr (!kPersistent) break;
    finish_item();
  }
  if constexpr (!kPersistent) finish_item();
  if (ds_storer) bulk_wait<0>();  // the last stores have read shared memory and written dS
  if constexpr (kPersistent && !kStoreDs) {
    // No tile left: the dQ roles' next tile slot says so, once its buffers are free (kSummed: from the
    // consumer that would finish it).
    const int i = dq_buffer(tile_no, c);
    if (!kSumDq || c != dq_partial_writer(tile_no)) {
      mbarrier_wait<false>(&dq_empty[i], (dq_uses(tile_no) & 1) ^ 1, "dq_empty (consumer, end)", tile_no);
      // (The readers read the slot once consumer 0's buffer is full: one writer, that consumer's.)
      if (kSumDq || c == 0) tell_dq_tile(tile_no, WsItem{kWsNoItem, 0, kWsNoItem, 0, 0});
      mbarrier_arrive(&dq_full[i]);
    }
  }
#else
  __trap();  // built without sm_90a: the launcher never picks this kernel there
#endif
}

}  // namespace ft::cuda::flash
