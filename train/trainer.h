// The training loop: a GPT-2 on one device, its parameters in a ParamArena, AdamW over the
// arena's two regions, gradient accumulation, the LR schedule, fp16 loss scaling, periodic
// evaluation and checkpoints, and resumption that reproduces an uninterrupted run bit for bit.
//
// One optimizer step (step s, counting from 0):
//   zero the gradient arena
//   for each of the A = gradient_accumulation_steps micro-batches (B x T tokens, the loader's
//   next batch): forward, backward of loss * loss_scale (autograd adds into the arena)
//   read the mean loss (the one host sync of a step; a non-finite loss stops the run here, before
//   the weights change, with an ft::Error naming the step)
//   norm = ||grads|| on the device; AdamW with grad_scale = 1 / (A * loss_scale), so the update is
//   that of one batch of A*B sequences (each micro-batch loss is a mean over its B*T targets);
//   clipping and the skip of a non-finite step happen in the kernel
//   fp16 only: read the norm's finiteness and update the loss scale
//
// What makes resume exact: the checkpoint after step k holds the fp32 master weights, AdamW's m and
// v, the dropout generator's {seed, offset} and the loader's position (the next batch), and the
// loss scaler; everything a later step reads is a function of those and the config.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/pinned_transfer.h"
#include "data/loader.h"
#include "nn/gpt.h"
#include "train/adamw.h"
#include "train/config/config.h"
#include "train/evaluate.h"
#include "train/lr_schedule.h"
#include "train/metrics.h"
#include "train/param_arena.h"
#include "train/precision.h"
#include "train/step_timer.h"

namespace ft {

class CapturedMicroStep;  // train/graph_step.h
class DataParallel;       // train/dist_data_parallel.h

struct TrainerOptions {
  bool resume = false;      // continue from find_latest_checkpoint(out_dir); none there is an error
  std::string init_from;    // else: take the weights (only) from this HF GPT-2 directory, its
                            // position table cropped to max_seq_len (load_hf_gpt2_for_init)
  int64_t stop_after = -1;  // >= 0: return once this many steps are done, writing nothing extra
                            // (an interruption, for tests); the schedule still spans the whole run
  std::ostream* out = nullptr;  // the start-of-run summary and progress lines; null: silent
};

struct TrainSummary {
  int64_t start_step = 0, end_step = 0;  // optimizer steps done before and after run()
  std::vector<double> losses;            // the mean training loss of each step run()
  double val_loss = -1;                  // the last evaluation, -1 without one
  double seconds = 0;
  double tokens_per_s = 0;
  std::string last_checkpoint;           // empty when none was written
};

class Trainer {
 public:
  // Builds the model on the configured device (ft::resolve_device), the arena, the optimizer and
  // the loaders, then restores a checkpoint or initial weights as `options` says.
  explicit Trainer(const TrainConfig& cfg, const TrainerOptions& options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs to total_steps() (or options.stop_after), evaluating, logging and checkpointing on the
  // configured intervals and at the end.
  TrainSummary run();
  // One optimizer step; returns its mean training loss.
  double train_step();
  // Validation loss over eval_steps batches of val_data (throws when there is no val_data).
  EvalResult evaluate();
  // Writes out_dir/ckpt-<step>/ and prunes to keep_checkpoints; returns the path.
  std::string save_checkpoint();

  const TrainConfig& config() const { return cfg_; }
  Device device() const { return device_; }
  nn::GPT& model() { return *model_; }
  ParamArena& arena() { return *arena_; }
  const LossScaler& loss_scaler() const { return scaler_; }
  int64_t step() const { return step_; }
  int64_t total_steps() const { return total_steps_; }
  // Data parallelism (issue 7): non-null when the environment describes a job of several ranks
  // (train/dist/dist_env.h); then the device is cuda:local_rank (or the CPU), each rank reads its slice
  // of every global batch, gradients are summed over ranks, and only rank 0 writes logs, metrics
  // and checkpoints.
  DataParallel* data_parallel() { return dp_.get(); }
  int world_size() const;

 private:
  void restore(const std::string& checkpoint_dir);
  void print_header(std::ostream& out) const;
  std::string stop_message(double loss) const;

  TrainConfig cfg_;
  TrainerOptions options_;
  Device device_;
  std::unique_ptr<nn::GPT> model_;
  std::unique_ptr<ParamArena> arena_;
  std::unique_ptr<AdamW> optimizer_;
  LossScaler scaler_;
  std::unique_ptr<Loader> train_loader_, val_loader_;
  std::unique_ptr<CapturedMicroStep> graph_step_;  // compile_model on a GPU, else null (eager)
  PinnedReadback loss_readback_;                   // each step's loss, read while its norm runs
  LrSchedule schedule_;
  std::unique_ptr<MetricsLog> metrics_;  // null on ranks other than 0
  std::unique_ptr<DataParallel> dp_;     // after what it references, so destroyed first
  std::unique_ptr<StepTimer> step_timer_;  // FLASHTRAIN_STEP_TIMING=1: GPU time per step phase
  int64_t step_ = 0, total_steps_ = 0;
  int64_t skipped_steps_ = 0;  // fp16 overflow skips
  double last_lr_ = 0;
  std::string init_note_;  // --init-from: where the weights came from, for the header
};

}  // namespace ft
