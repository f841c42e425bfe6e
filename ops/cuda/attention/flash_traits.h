// Tile shapes of the flash kernels, one struct per kernel family. Chosen per head dim in the
// launcher (flash_launch.cuh); the reasons and measurements are there and in bench/attention/NOTES.md.
#pragma once

namespace ft::cuda::flash {

// Forward: a CTA owns kBlockM query rows of one (batch, head) and streams kBlockN-key tiles of K
// and V through shared memory (double-buffered). Each warp owns kMTiles x 16 query rows, so the
// online-softmax statistics of a row live in one quad of one warp.
// kQInRegs: the warp's Q (and in the dQ kernel dO) A fragments stay in registers for the whole
// pass; false re-reads them from shared memory for every key tile (D = 256: Q's fragments of 16
// rows are 64 registers a thread, on top of the 128 of the 16 x 256 fp32 accumulator).
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, int kMinBlocksPerSm_ = 2, bool kQInRegs_ = true>
struct FlashFwdTraits {
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;  // __launch_bounds__: caps registers
  static constexpr bool kQInRegs = kQInRegs_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr int kMTiles = kBlockM / (16 * kNWarps);  // 16-row mma tiles per warp
  static constexpr int kSmemStride = kHeadDim + 8;  // +16 bytes per row: ldmatrix conflict-free
  static constexpr int kSmemBytes = (kBlockM + 4 * kBlockN) * kSmemStride * 2;
  static_assert(kMTiles >= 1 && kMTiles * 16 * kNWarps == kBlockM, "kBlockM = 16 * warps * tiles");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 16 == 0, "mma tiles are 16 wide");
};

// Backward: a CTA owns kBlockN keys of one (batch, head), each warp kNTiles x 16 of them (dK and dV
// rows stay in its registers), and loops over kBlockM-query tiles of Q, dO, lse, D.
// kDiag: 2 skips the whole dQ phase (the split deterministic backward, whose dQ comes from
// flash_bwd_dq_kernel); 1 (timing experiments only, wrong dQ) skips the dQ atomics.
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, bool kKVInRegs_,
          int kMinBlocksPerSm_ = 1, int kNTiles_ = 1, int kDiag_ = 0>
struct FlashBwdTraits {
  static constexpr int kDiag = kDiag_;
  static constexpr int kNTiles = kNTiles_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = 32 * kNWarps;
  static constexpr bool kKVInRegs = kKVInRegs_;  // keep K and V A-fragments in registers
  static constexpr int kSmemStride = kHeadDim + 8;
  static constexpr int kDsStride = kBlockM + 8;  // dS^T tile (kBlockN x kBlockM) in shared memory
  // dQ = dS K: warps tile the kBlockM x kHeadDim output as kWarpsM x kWarpsD.
  static constexpr int kWarpsM = kBlockM / 16;
  static constexpr int kWarpsD = kNWarps / kWarpsM;
  static constexpr int kDqCols = kHeadDim / kWarpsD;
  static constexpr int kSmemBytes = 2 * kBlockN * kSmemStride * 2      // K, V
                                    + 4 * kBlockM * kSmemStride * 2    // Q, dO x 2 stages
                                    + kBlockN * kDsStride * 2          // dS^T
                                    + 2 * 2 * kBlockM * 4;             // lse, D x 2 stages
  static_assert(kBlockN == 16 * kNWarps * kNTiles, "each warp owns kNTiles x 16 keys");
  static_assert(kWarpsM * kWarpsD == kNWarps && kDqCols % 16 == 0, "dQ warp tiling");
};

// The same backward tile without its dQ phase.
template <class Kt>
using FlashBwdNoDq = FlashBwdTraits<Kt::kHeadDim, Kt::kBlockM, Kt::kBlockN, Kt::kNWarps, Kt::kKVInRegs,
                                    Kt::kMinBlocksPerSm, Kt::kNTiles, 2>;

}  // namespace ft::cuda::flash
