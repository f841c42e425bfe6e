// ZeRO stage 1: AdamW's state and update sharded across the data-parallel ranks (config `zero1`).
//
// Shards. With N = arena.numel() and W ranks, n = floor(N / (16 W)) * 16; rank r owns the
// contiguous slice [r n, (r+1) n) of the arena. The tail [W n, N) (fewer than 16 W elements: the
// arena is not ours to pad) is all-reduced whole and updated by every rank identically, with its m
// and v on every rank. m and v are allocated for the shard and the tail only: 8 (n + tail) bytes a
// rank instead of 8 N.
//
// One optimizer step:
//   reduce_gradients()  in-place reduce-scatter of grads[0, W n) (rank r's slice becomes the sum
//                       over ranks of its slice; the rest of the arena is stale until zeroed) and an
//                       all-reduce of the tail; the compute stream then waits for both. With a bf16
//                       wire (grad_reduce_dtype: bf16) the gradients are cast to a bf16 buffer
//                       first, reduce-scattered there (half the bytes), and the owned slice is
//                       widened back into grads; the tail stays fp32.
//   grad_norm()         the global norm: each rank's norm over what it owns (the last rank also
//                       counts the tail), all-gathered, and ops::grad_norm of those W norms, i.e.
//                       sqrt(sum of squares) -- no host round trip
//   step()              ops::adamw_step on the owned slice and the tail, cut by the arena's decay /
//                       no-decay boundary (up to two calls per range); it writes the owned slice of
//                       the working copy too. Then an in-place all-gather: of the bf16/f16 working
//                       copy under mixed precision, of the fp32 master otherwise.
// Gathering the working copy moves half the bytes of the master and needs no cast pass afterwards;
// every rank then computes with round(master) of every owner, as on one GPU, but its own master is
// current only in its own slice (and the tail). gather_master() makes every rank's master whole
// (bit-identical across ranks) again; the trainer calls it before anything reads the master
// (checkpoints, the end of run()).
//
// Checkpoints keep the single-GPU format: state_tensors() all-gathers m and v into full (N)
// tensors (a collective: every rank calls it), so a ZeRO-1 checkpoint resumes with or without ZeRO,
// and load_state() takes the rank's slices of full tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/grad_norm.h"
#include "train/adamw.h"
#include "train/checkpoint/safetensors.h"
#include "train/dist/communicator.h"
#include "train/param_arena.h"

namespace ft {

class Zero1 {
 public:
  // wire: the reduce-scatter's dtype, F32 or BF16.
  Zero1(ParamArena& arena, const AdamWConfig& cfg, Communicator& comm, DType wire = DType::F32);

  void reduce_gradients();
  ops::GradNorm grad_norm();
  // As AdamW::step; grad_scale must include 1/world_size (the gradients are sums over ranks).
  void step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm);
  // Every rank's master made whole again after step() gathered the working copy instead (collective:
  // every rank calls it; a no-op, also on every rank, when nothing is stale).
  void gather_master();
  bool master_partial() const { return master_partial_; }

  std::vector<NamedTensor> state_tensors();  // collective
  void load_state(const std::vector<NamedTensor>& tensors);

  int64_t shard_numel() const { return n_; }
  int64_t tail_numel() const { return arena_.numel() - n_ * comm_.world_size(); }
  int64_t state_numel() const { return m_.numel(); }  // elements of m (and of v) on this rank

 private:
  struct Range {
    int64_t begin, end;      // arena elements
    int64_t state_offset;    // where the range starts in m_ / v_
  };
  std::vector<Range> update_ranges() const;

  ParamArena& arena_;
  AdamWConfig cfg_;
  Communicator& comm_;
  int64_t n_ = 0;
  Tensor m_, v_;   // (n + tail) f32: the owned slice, then the tail
  Tensor wire_;    // (W n) bf16 with the bf16 wire, else undefined
  bool master_partial_ = false;  // step() gathered the working copy: other ranks' slices of master are old
};

}  // namespace ft
