// Gradient all-reduce for data parallelism, overlapped with the backward pass.
//
// The gradient arena (train/param_arena.h: decay region, then no-decay region, each in model order)
// is cut into buckets of about `bucket_mb` MiB along the arena: a bucket is a run of whole
// parameter tensors (with the padding after them), so the buckets tile [0, N). A tensor larger than
// the bucket size is a bucket of its own.
//
// Overlap. Before the backward pass of the LAST micro-batch of an optimizer step the trainer calls
// arm(); from then on each parameter's grad-ready hook (autograd::set_grad_ready_hook: fired once
// per pass, after the leaf's last contribution -- GPT-2's tied wte gets two) counts the bucket
// down, and a bucket whose every tensor is final is launched at once: the comm stream waits for the
// compute stream up to now (an event), then all-reduces the bucket in place. The backward pass goes
// on meanwhile. finish() launches whatever is left (buckets of parameters no gradient reached) and
// makes the compute stream wait for every all-reduce, so the optimizer reads summed gradients.
// Earlier micro-batches only accumulate locally: one all-reduce per optimizer step.
//
// The result is the SUM over ranks; the trainer folds 1/world_size into AdamW's grad_scale.
//
// Wire dtype (grad_reduce_dtype, issue 20). bf16 halves the bytes on the wire: launch() rounds the
// bucket into its slice of a persistent bf16 buffer (arena-sized, 2 bytes a parameter, allocated
// once so a CUDA graph can bake its address in) on the compute stream, and all-reduces that slice;
// finish() widens the whole buffer back into the fp32 arena in one pass once the compute stream
// has waited for the collectives. Accumulation over micro-batches stays fp32 (in the arena); only
// the cross-rank sum is bf16.
//
// CUDA graphs (compile_model, issue 20). Everything here is capturable: arm() and the hooks run on
// the host while the backward pass is captured, so each launch() becomes an event fork from the
// compute stream to the comm stream, the collective, and finish()'s event join -- the replayed
// graph all-reduces each bucket as soon as its last gradient kernel is done, like the eager pass.
//
// sync_all() (no overlap): all buckets at once, after the backward pass -- what finish() does
// when overlap is off (FLASHTRAIN_DP_OVERLAP=0), to measure what the overlap gains.
//
// Launcher (ZeRO-1 over the copy engines, zero1.h): set_launcher hands each ready bucket's arena
// range to a callback instead of all-reducing it; finish() then hands over what is left, and the
// callback's owner completes the sum.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nn/module.h"
#include "train/dist/communicator.h"
#include "train/param_arena.h"

namespace ft {

class GradSync {
 public:
  // Installs the hooks on `model`'s parameters (the arena's leaves, so build the arena first).
  // wire: DType::F32 (sum the arena in place) or DType::BF16 (see above).
  GradSync(ParamArena& arena, nn::Module& model, Communicator& comm, double bucket_mb, DType wire = DType::F32);
  ~GradSync();  // removes the hooks
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  struct Bucket {
    int64_t begin = 0, end = 0;  // arena elements [begin, end)
    int tensors = 0;             // parameter tensors in it
  };
  const std::vector<Bucket>& buckets() const { return buckets_; }

  using Launcher = std::function<void(int64_t begin, int64_t end)>;
  void set_launcher(Launcher launcher) { launcher_ = std::move(launcher); }

  // Overlap off: arm() does nothing and finish() reduces all buckets after the backward pass.
  void set_overlap(bool on) { overlap_ = on; }
  bool overlap() const { return overlap_; }
  DType wire_dtype() const { return wire_.defined() ? DType::BF16 : DType::F32; }

  void arm();     // before the last micro-batch's backward
  void finish();  // after it: launch the rest, compute stream waits for all
  void sync_all();  // all buckets now (overlap or not), compute stream waits for all

  // How many buckets the last finish() found launched already during the backward pass.
  int launched_during_backward() const { return launched_early_; }

 private:
  void on_ready(int bucket);
  void launch(int bucket);
  void complete();  // compute stream waits for the collectives; bf16: widen into the arena

  ParamArena& arena_;
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<Tensor> hooked_;     // the leaves whose hooks we set, to remove them
  Tensor wire_;                    // (N) bf16 when the sum travels in bf16, else undefined
  Launcher launcher_;              // set: buckets go to it, not to all-reduces
  std::vector<int> remaining_;     // per bucket: tensors not yet final in this pass
  std::vector<bool> launched_;
  bool armed_ = false, overlap_ = true;
  int launched_early_ = 0;
};

}  // namespace ft
