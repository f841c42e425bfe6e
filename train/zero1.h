// ZeRO stage 1: AdamW's state and update sharded across the data-parallel ranks (config `zero1`).
//
// Shards. With N = arena.numel(), W ranks and K rounds, c = floor(N / (16 W K)) * 16 and the
// arena's first K W c elements are K rounds of W chunks of c elements: round k is [k W c, (k+1) W c)
// and rank r owns its chunk r, [(k W + r) c, (k W + r + 1) c). The tail [K W c, N) (fewer than
// 16 W K elements: the arena is not ours to pad) is all-reduced whole and updated by every rank
// identically, with its m and v on every rank. m and v are allocated for the owned chunks and the
// tail only: 8 (K c + tail) bytes a rank instead of 8 N. Rounds let the collectives pipeline with
// the work around them (each round's collective is over one contiguous range): round k's
// reduce-scatter runs while round k + 1's gradients are cast to bf16, round k's all-gather while
// AdamW updates round k + 1. K = 1 is one contiguous slice per rank. K: kDefaultRounds, or
// FLASHTRAIN_ZERO1_ROUNDS (benchmarks), fewer where the arena is too small for c >= 16. GPT-2-small
// on 2 H100s, bf16 reduce-scatter, ms a step: 37.84 with 1 round, 37.52 with 4, 37.71 with 8
// (bench/results/zero1-step-timing-h100-2gpu.md).
//
// One optimizer step:
//   reduce_gradients()  per round, an in-place reduce-scatter (rank r's chunk becomes the sum over
//                       ranks of its chunk; the rest of the arena is stale until zeroed); an
//                       all-reduce of the tail; the compute stream then waits for all. With a bf16
//                       wire (grad_reduce_dtype: bf16) each round is cast to a bf16 buffer first,
//                       reduce-scattered there (half the bytes), and the owned chunks are widened
//                       back into grads; the tail stays fp32.
//   grad_norm()         the global norm: each rank's norm over what it owns (the last rank also
//                       counts the tail), all-gathered, and ops::grad_norm of those W norms, i.e.
//                       sqrt(sum of squares) -- no host round trip
//   step()              per round, ops::adamw_step on the owned chunk, cut by the arena's decay /
//                       no-decay boundary (up to two calls per range), which writes the chunk of the
//                       working copy too, then the round's in-place all-gather: of the bf16/f16
//                       working copy under mixed precision; then the tail. In fp32 the master is
//                       all-gathered at the end instead.
// Gathering the working copy moves half the bytes of the master and needs no cast pass afterwards;
// every rank then computes with round(master) of every owner, as on one GPU, but its own master is
// current only in its own chunks (and the tail). gather_master() makes every rank's master whole
// (bit-identical across ranks) again; the trainer calls it before anything reads the master
// (checkpoints, the end of run()).
//
// Over the copy engines (use_copy_engines; bench/train/NOTES.md session 19): the reduce-scatter of
// the sharded prefix moves no bytes through NCCL. Every rank keeps an inbox of (W - 1) shards,
// one per other rank, which the others map (PeerExchange). send_ready(begin, end), which GradSync
// calls as each bucket's gradients become final during the backward, copies the parts of
// [begin, end) that other ranks own into their inboxes on the copy engines: no SM time taken from
// the backward, which NCCL's kernels slow by as much as they hide. reduce_gradients() then makes
// the compute stream wait for this rank's copies, all-reduces the tail (a one-element sum when
// there is none: the collective after every rank's copies that says every copy into this inbox
// is done). The inbox's shards are added into the owned chunks by grad_norm(), as it reads them
// (ops::add_then_grad_norm: one pass over the chunks instead of a sum pass and a norm pass; 0.15 to
// 0.2 ms a step on 2 H200s), so over the copy engines grad_norm() completes the reduction and must
// come between reduce_gradients() and step() -- as in every training step (trainer.cpp). The
// copies move the wire dtype: fp32 (with two ranks a + b, the bits of the NCCL path) or bf16 (each
// bucket rounded into wire_ as it is handed over, half the bytes; the sum widens the received
// halves into the fp32 owned chunks, so only the other ranks' parts are rounded).
//
// Under mixed precision and at two ranks, step()'s all-gather of the working copy takes the copy
// engines as well: each round's owned slice, once AdamW wrote it, is copied into every other
// rank's working copy (a second exchange, whose inbox is the working copy itself), and one
// collective after the last round's copies tells each rank that its working copy is whole again;
// NCCL's all-gather kernels would share the SMs with AdamW's next rounds. No rank writes into
// another's working copy before that rank's backward of the next step is done: the copies follow
// the gradients' barrier, which every rank enters after its backward. GPT-2-small on 4 H200s, same
// call: grad norm + optimizer 0.95 against 1.24 ms at 2 ranks; at 4, where each rank's slice is
// copied three times, 1.36 against 1.21 for NCCL's all-gather, which therefore stays there.
//
// Checkpoints keep the single-GPU format: state_tensors() all-gathers m and v into full (N)
// tensors (a collective: every rank calls it), so a ZeRO-1 checkpoint resumes with or without ZeRO,
// and load_state() takes the rank's slices of full tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ops/grad_norm.h"
#include "train/adamw.h"
#include "train/checkpoint/safetensors.h"
#include "train/dist/communicator.h"
#include "train/dist/peer_exchange.h"
#include "train/param_arena.h"

namespace ft {

class Zero1 {
 public:
  static constexpr int kDefaultRounds = 4;
  // The shard layout (above) of an arena of N elements over W ranks in (at most) `rounds` rounds.
  struct Layout {
    int64_t rounds = 1, chunk = 0, tail = 0;
  };
  static Layout layout(int64_t N, int64_t W, int64_t rounds);

  // wire: the reduce-scatter's dtype, F32 or BF16. rounds <= 0: kDefaultRounds or the environment.
  Zero1(ParamArena& arena, const AdamWConfig& cfg, Communicator& comm, DType wire = DType::F32, int rounds = 0);

  // Collective. Throws when the ranks cannot map each other's GPU memory (zero1.h).
  void use_copy_engines();
  bool copy_engines() const { return exchange_ != nullptr; }
  // step() copies the working copy to the other ranks on the copy engines (two ranks; above).
  bool gathers_on_copy_engines() const { return gather_ != nullptr; }
  // Copy-engine mode: the gradients of arena range [begin, end) are final on this rank.
  void send_ready(int64_t begin, int64_t end);

  void reduce_gradients();
  // Over the copy engines also the end of the reduction: the received shards added (above).
  ops::GradNorm grad_norm();
  // As AdamW::step; grad_scale must include 1/world_size (the gradients are sums over ranks).
  void step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm);
  // Every rank's master made whole again after step() gathered the working copy instead (collective:
  // every rank calls it; a no-op, also on every rank, when nothing is stale).
  void gather_master();
  bool master_partial() const { return master_partial_; }

  std::vector<NamedTensor> state_tensors();  // collective
  void load_state(const std::vector<NamedTensor>& tensors);

  int64_t rounds() const { return layout_.rounds; }
  int64_t shard_numel() const { return layout_.rounds * layout_.chunk; }  // elements this rank owns
  int64_t tail_numel() const { return layout_.tail; }
  int64_t state_numel() const { return m_.numel(); }  // elements of m (and of v) on this rank

 private:
  struct Range {
    int64_t begin, end;      // arena elements
    int64_t state_offset;    // where the range starts in m_ / v_
  };
  std::vector<Range> update_ranges() const;  // the owned chunks in round order, then the tail
  // An owned chunk's round: m_ and v_ hold the owned chunks one after another in round order.
  int64_t round_of(const Range& rg) const { return rg.state_offset / layout_.chunk; }
  int64_t round_begin(int64_t k) const { return k * comm_.world_size() * layout_.chunk; }
  int64_t owned_begin(int64_t k) const { return (k * comm_.world_size() + comm_.rank()) * layout_.chunk; }
  int64_t prefix() const { return round_begin(layout_.rounds); }  // K W c: where the tail starts

  ParamArena& arena_;
  AdamWConfig cfg_;
  Communicator& comm_;
  Layout layout_;
  Tensor m_, v_;   // (K c + tail) f32: the owned chunks in round order, then the tail
  Tensor wire_;    // (K W c) bf16 with the bf16 wire (indexed like the arena), else undefined
  bool master_partial_ = false;  // step() gathered the working copy: other ranks' slices of master are old
  std::unique_ptr<PeerExchange> exchange_;  // copy-engine mode; its inbox: (W - 1) x shard_numel() of the wire dtype
  std::unique_ptr<PeerExchange> gather_;    // copy-engine mode with a working copy: the working copy is its inbox
  Tensor barrier_;                          // (1) f32: the one-element sum when there is no tail
  // The compute stream waits for this rank's sends, then for a sum over the ranks (`sum`, in
  // place) issued after them: every rank's sends into this rank's inbox are done.
  void barrier_after_sends(PeerExchange& exchange, const Tensor& sum);
  // Which of rank q's inbox shards rank `from` fills (the other ranks in rank order).
  static int64_t inbox_slot(int64_t q, int64_t from) { return from < q ? from : from - 1; }
  // Parameters whose leaves are their fp32 masters (ParamArena::Entry::stays_fp32, nn::LayerNorm with
  // fp32 parameters) read the master, which step() updates only in the owned chunks: after the
  // working copy's gather, sync_fp32_leaves() gives every rank their owners' values. Over the span
  // of the prefix those leaves touch (GPT-2-small: the LayerNorms among the biases, under 0.5 MB),
  // each rank contributes its owned elements and zeros (fp32_own_), a sum over ranks makes the
  // owners' values (x + 0 + ... = x exactly), and they replace the leaves' elements (fp32_keep_ is
  // 0 there, 1 on the span's other elements). The tail needs nothing: every rank updates it alike.
  int64_t fp32_begin_ = 0;
  Tensor fp32_own_, fp32_keep_;  // (span) f32 masks; undefined when no fp32 leaf is in the prefix
  void init_fp32_sync();
  void sync_fp32_leaves();
  // Where round k's chunk of inbox slot `slot` starts, in elements of the inbox.
  int64_t inbox_offset(int64_t slot, int64_t k) const { return slot * shard_numel() + k * layout_.chunk; }
};

}  // namespace ft
