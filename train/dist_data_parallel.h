// The trainer's data-parallel side (issue 7), kept out of trainer.cpp: joining the job, the
// communicator, gradient sync (GradSync) or ZeRO-1, and the few collectives around a step.
//
// Set-up, in order (the trainer does this after building the model and the arena on
// rank_device()): the TCP rendezvous (dist_timeout_s), the communicator -- NCCL on a CUDA device,
// the rendezvous sockets on the CPU -- and the rendezvous watchdog (a peer that dies ends this rank
// through abort_job, naming it). Then share_initial_weights() makes every rank start from rank 0's
// weights: rank 0 keeps its master, the others zero theirs, and one all-reduce sums them (x + 0 = x
// exactly), so a mismatch of seeds or init code cannot silently fork the replicas.
//
// Per optimizer step (the trainer's train_step):
//   before_last_backward()   arms the bucket hooks (overlap) for the last micro-batch
//   after_backward(loss_sum) the gradient sum over ranks (GradSync::finish, or ZeRO-1's
//                            reduce-scatter) and the loss sum over ranks; the compute stream
//                            waits for both.
//   With compile_model the trainer hands these two to CapturedMicroStep (train/graph_step.h),
//   which calls them around the last micro-step's backward while capturing it, so the replayed
//   graph holds the bucket all-reduces (forked to the comm stream by events as each bucket's
//   gradients become final) and the loss all-reduce; after each such replay it calls
//   after_graph_replay(), which puts the replay under the communicator's watchdog.
//   grad_norm()              the global gradient norm (ZeRO-1: from the shards)
//   optimizer_step() / optimizer_state() / load_optimizer_state(): ZeRO-1's, when zero1 is on
//                            (otherwise the trainer keeps its AdamW over the summed gradients).
// AdamW's grad_scale gets 1/world_size on top of 1/(A * loss_scale): gradients are sums.
// FLASHTRAIN_DP_OVERLAP=0 in the environment turns the bucket overlap off (every bucket after the
// backward pass), which is how bench/train/scaling.sh measures what the overlap gains.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "ops/grad_norm.h"
#include "train/adamw.h"
#include "train/dist/communicator.h"
#include "train/dist/dist_env.h"
#include "train/dist/rendezvous.h"
#include "train/grad_sync.h"
#include "train/param_arena.h"
#include "train/zero1.h"

namespace ft {

// The device rank `env` uses: cuda:local_rank when `configured` is a CUDA device (an error naming
// both when this host has fewer GPUs than local ranks), the CPU otherwise (ranks share it).
Device rank_device(Device configured, const DistEnv& env);

struct DataParallelOptions {
  double timeout_s = 300;      // dist_timeout_s
  double bucket_mb = 25;       // allreduce_bucket_mb
  bool zero1 = false;
  bool overlap = true;         // launch buckets during the backward pass
  DType grad_wire = DType::F32; // grad_reduce_dtype: the all-reduce's (GradSync) or reduce-scatter's (ZeRO-1) dtype
  enum class Want { No, Yes, Auto };
  Want zero1_copy_engines = Want::Auto;  // zero1_transport: nccl / copy_engines / auto
  AdamWConfig adamw;           // for ZeRO-1
  std::ostream* log = nullptr; // rendezvous refusals (rank 0); null = std::cerr
};

class DataParallel {
 public:
  DataParallel(const DistEnv& env, Device device, ParamArena& arena, nn::Module& model,
               const DataParallelOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_root() const { return env_.rank == 0; }
  const DistEnv& env() const { return env_; }
  Communicator& comm() { return *comm_; }
  GradSync* grad_sync() { return grad_sync_.get(); }  // null with ZeRO-1 over NCCL
  // ZeRO-1's reduce-scatter runs on the copy engines during the backward (zero1.h), so a captured
  // last micro-step must hold it (the trainer then hands the reduction to the graph).
  bool copy_engines() const { return zero1_ && zero1_->copy_engines(); }
  bool gathers_on_copy_engines() const { return zero1_ && zero1_->gathers_on_copy_engines(); }
  // Why zero1_transport: auto fell back to NCCL ("" when it did not).
  const std::string& transport_note() const { return transport_note_; }
  Zero1* zero1() { return zero1_.get(); }             // null without

  void share_initial_weights();
  void before_last_backward();
  void after_backward(const Tensor& loss_sum);
  void after_graph_replay();
  ops::GradNorm grad_norm();
  void optimizer_step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm);
  std::vector<NamedTensor> optimizer_state();  // collective
  // Collective: every rank's fp32 master whole again (ZeRO-1 under mixed precision gathers only the
  // working copy each step, zero1.h); call before reading arena.master().
  void sync_master();
  void load_optimizer_state(const std::vector<NamedTensor>& tensors);
  // Host-side: every rank arrives before any leaves.
  void barrier() { comm_->barrier(); }

 private:
  DistEnv env_;
  ParamArena& arena_;
  // Destroyed in reverse: the sync objects, then the communicator, then the rendezvous.
  std::unique_ptr<Rendezvous> rendezvous_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<GradSync> grad_sync_;
  std::unique_ptr<Zero1> zero1_;
  std::string transport_note_;
};

}  // namespace ft
