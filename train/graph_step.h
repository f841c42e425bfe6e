// compile_model: one training micro-step (forward + backward) captured in a CUDA graph and
// replayed -- our counterpart of torch.compile's whole-step capture.
//
// A micro-step, eager or replayed, is exactly
//   inputs, targets = windows[:, :T], windows[:, 1:]     (contiguous copies on the device)
//   seed = the loss scale, 1 without one                  (a () f32 tensor on the device)
//   loss = model.forward(inputs, targets, B * T, seed).loss (seed: the head's grad_scale_hint)
//   loss_sum += f32(loss)
//   backward(loss, seed)
// with the gradients adding into the parameters' gradient views (the trainer's arena), so
// gradient accumulation is A replays between one zeroing and one optimizer step, both outside.
// It issues the same kernels with the same arguments as the trainer's eager micro-step, so a
// replay gives bit-identical losses and gradients (tests/train/graph_step_test.cpp).
//
// What varies from replay to replay lives in device memory that run() rewrites, in stream order,
// before the launch (through pinned buffers, core/pinned_transfer.h: from pageable memory a copy
// would first wait for the optimizer's kernels queued before it, and the GPU would idle until the
// host had staged it): the batch (windows, (B, T+1) int32), the backward seed (so fp16's loss scale
// is not frozen into the graph), and the Philox base word: while capturing, the model's Generator
// hands out offsets relative to the capture start plus that word (core/random.h), and before each
// replay run() stores the generator's logical offset there and advances the generator by what one
// micro-step consumes -- the masks move on exactly as in eager mode and state() stays exact for
// checkpoints. The graph's memory is a private allocator pool (core/cuda/allocator_pool.h).
//
// Lifecycle: the first run() is eager (a warm-up: kernels load, cuBLASLt plans are built, the
// cuBLAS workspace exists); the second captures (its cached warm-up activations are released
// first, so the pool does not double the peak) and replays; later ones replay. A batch of another
// shape re-captures. Nothing else may use the model's generator between runs without the
// generator staying consistent -- which it does, since the replayer reads it at every run.
//
// Data parallel (issue 20): set_reduction() hands in the gradient sum over ranks. Only the LAST
// micro-step of an optimizer step may all-reduce, so there are two micro-steps, each with its own
// warm-up and graph: the plain one (run(..., last = false)) and the reducing one (last = true),
// whose body calls reduction.before_backward() before the backward pass (GradSync::arm: each
// bucket's grad-ready hook then forks the comm stream from the compute stream by an event and
// all-reduces the bucket there, inside the capture) and reduction.after_backward(loss_sum) after
// it (the remaining buckets, the loss all-reduce, the event join back into the compute stream).
// The replayed graph thus overlaps every bucket's all-reduce with the rest of the backward pass,
// as the eager pass does, and the loss and gradients the trainer reads next are sums over ranks.
// With gradient_accumulation_steps = 1 only the reducing graph exists. The two graphs share one
// allocator pool (cuda::Graph's shared-pool form): they replay one after another on one stream
// and keep nothing in the pool between replays (the batch, seed, loss and gradients live outside
// it), so two graphs cost the memory of one. reduction.after_replay() runs after every replay
// of the reducing graph (the watchdog's event).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>

#include "core/pinned_transfer.h"
#include "core/tensor.h"
#include "data/loader.h"
#include "nn/gpt.h"

namespace ft {

namespace cuda {
class Graph;
}

// The gradient sum over ranks, as CapturedMicroStep calls it inside the last micro-step (above).
struct MicroStepReduction {
  std::function<void()> before_backward;
  std::function<void(const Tensor& loss_sum)> after_backward;
  std::function<void()> after_replay;
};

class CapturedMicroStep {
 public:
  // model: on a CUDA `device`, in training mode, its parameters' gradients set up (views into
  // the arena). log: where the capture is announced ("compile_model: micro-step captured ...").
  CapturedMicroStep(nn::GPT& model, Device device, std::ostream* log = nullptr);
  ~CapturedMicroStep();
  CapturedMicroStep(const CapturedMicroStep&) = delete;
  CapturedMicroStep& operator=(const CapturedMicroStep&) = delete;

  // Data parallel: the last micro-step of every optimizer step reduces (see above). Before the
  // first run().
  void set_reduction(MicroStepReduction reduction);
  bool reduces() const { return static_cast<bool>(reduction_.after_backward); }

  // Zeroes loss_sum(); call before the first micro-step of an optimizer step.
  void begin_step();
  // One micro-step on `batch` with the backward seeded by loss_scale (see above); `last`: the
  // optimizer step's last micro-step, which reduces when set_reduction() was called.
  void run(const Batch& batch, double loss_scale, bool last = true);
  // The summed micro-step losses since begin_step(), (1) f32 on the device.
  const Tensor& loss_sum() const { return loss_sum_; }

  bool captured() const;                 // any of the (at most two) graphs
  int64_t num_kernels() const;           // kernel nodes of the graph captured last, 0 before capture
  uint64_t philox_per_micro_step() const { return philox_per_step_; }
  int64_t replays() const { return replays_; }

 private:
  enum Kind { kPlain = 0, kReducing = 1 };
  struct Variant {
    std::unique_ptr<cuda::Graph> graph;
    bool warmed_up = false;
  };
  void load_batch(const Batch& batch);
  void drop_graphs();
  // The micro-step; eager_seed < 0: capturing (seed filled outside). reduce: the reducing kind.
  void body(double eager_seed, bool reduce);
  void capture(Kind kind);

  nn::GPT& model_;
  Device device_;
  std::ostream* log_;
  MicroStepReduction reduction_;
  std::array<Variant, 2> variants_;
  uint64_t pool_ = 0;  // cuda::PoolId shared by the variants' graphs; 0 before the first capture
  int64_t last_kernels_ = 0;
  Tensor windows_;     // (B, T+1) int32, read by the graph
  Tensor seed_;        // () f32: the backward seed and the head's grad_scale_hint
  Tensor loss_sum_;    // (1) f32
  Tensor philox_base_; // (1) i64: the logical generator offset of the current replay
  PinnedUpload batch_upload_, philox_upload_;
  int64_t B_ = 0, T_ = 0;
  uint64_t philox_per_step_ = 0;
  int64_t replays_ = 0;
};

}  // namespace ft
