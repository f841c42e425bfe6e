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
//                       all-reduce of the tail; the compute stream then waits for both
//   grad_norm()         the global norm: each rank's norm over what it owns (the last rank also
//                       counts the tail), all-gathered, and ops::grad_norm of those W norms, i.e.
//                       sqrt(sum of squares) -- no host round trip
//   step()              ops::adamw_step on the owned slice and the tail, cut by the arena's decay /
//                       no-decay boundary (up to two calls per range), then an in-place all-gather
//                       of the master weights and arena.refresh_working().
// Gathering the fp32 master (not the bf16 working copy) keeps one source of truth: every rank's
// master is then bit-identical, and the working copy is exactly round(master), as on one GPU. The
// refresh costs one cast pass over the arena (read 4 N, write 2 N bytes), small beside a step.
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
  Zero1(ParamArena& arena, const AdamWConfig& cfg, Communicator& comm);

  void reduce_gradients();
  ops::GradNorm grad_norm();
  // As AdamW::step; grad_scale must include 1/world_size (the gradients are sums over ranks).
  void step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm);

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
  Tensor m_, v_;  // (n + tail) f32: the owned slice, then the tail
};

}  // namespace ft
