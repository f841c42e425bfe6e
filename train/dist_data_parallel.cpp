#include "train/dist_data_parallel.h"

#include <cstdlib>
#include <string>

#include "autograd/variable.h"
#include "train/dist/cpu_communicator.h"
#include "train/dist/dist_abort.h"
#include "train/dist/nccl_communicator.h"

namespace ft {

Device rank_device(Device configured, const DistEnv& env) {
  if (!configured.is_cuda()) return Device::cpu();
  const int gpus = cuda_device_count();
  FT_CHECK_ARG(env.local_rank < gpus, "[dist] rank ", env.rank, " has local rank ", env.local_rank, " but this host has ",
               gpus, " GPU", gpus == 1 ? "" : "s", ": start at most ", gpus, " ranks per host (one per GPU)");
  const Device d = Device::cuda(env.local_rank);
  stream_for(d);  // makes cuda:local_rank current on this thread before anything touches a GPU
  return d;
}

DataParallel::DataParallel(const DistEnv& env, Device device, ParamArena& arena, nn::Module& model,
                           const DataParallelOptions& options)
    : env_(env), arena_(arena) {
  rendezvous_ = std::make_unique<Rendezvous>(env, options.timeout_s, options.log);
  // From here on a peer that dies ends this rank too (abort_job: NCCL aborted first, if there is
  // one), even while this rank is stuck in ncclCommInitRank or a collective.
  const int rank = env.rank;
  rendezvous_->start_watchdog([rank](const std::string& why) { abort_job(rank, str("the job lost a rank: ", why)); });
  if (device.is_cuda()) {
    comm_ = make_nccl_communicator(*rendezvous_, env.rank, env.world_size, device, options.timeout_s);
  } else {
    comm_ = std::make_unique<CpuCommunicator>(*rendezvous_);
  }
  if (options.zero1) {
    zero1_ = std::make_unique<Zero1>(arena, options.adamw, *comm_, options.grad_wire);
    // The reduce-scatter on the copy engines during the backward (zero1.h), buckets handed over as
    // GradSync finds them final: asked for, or (auto) tried on CUDA ranks, NCCL where it fails.
    const bool want = options.zero1_copy_engines == DataParallelOptions::Want::Yes ||
                      (options.zero1_copy_engines == DataParallelOptions::Want::Auto && device.is_cuda());
    if (want) {
      FT_CHECK_ARG(device.is_cuda(), "[dist] zero1_transport: copy_engines needs CUDA ranks, not ", device);
      try {
        zero1_->use_copy_engines();
      } catch (const Error& e) {
        if (options.zero1_copy_engines == DataParallelOptions::Want::Yes) throw;
        transport_note_ = str("ZeRO-1 reduce-scatters over NCCL: ", e.what());
      }
    }
    if (zero1_->copy_engines()) {
      grad_sync_ = std::make_unique<GradSync>(arena, model, *comm_, options.bucket_mb);
      Zero1* z = zero1_.get();
      grad_sync_->set_launcher([z](int64_t begin, int64_t end) { z->send_ready(begin, end); });
      grad_sync_->set_overlap(options.overlap);
    }
  } else {
    grad_sync_ = std::make_unique<GradSync>(arena, model, *comm_, options.bucket_mb, options.grad_wire);
    // FLASHTRAIN_DP_OVERLAP=0 turns the overlap off: the benchmark's way of measuring what it gains.
    const char* knob = std::getenv("FLASHTRAIN_DP_OVERLAP");
    grad_sync_->set_overlap(options.overlap && !(knob && std::string(knob) == "0"));
  }
}

DataParallel::~DataParallel() {
  grad_sync_.reset();  // its hooks may call into zero1_
  zero1_.reset();
  comm_.reset();
  // A clean goodbye, so the peers' watchdogs do not take this rank's exit for a failure.
  if (rendezvous_) rendezvous_->shutdown();
}

void DataParallel::share_initial_weights() {
  autograd::NoGradGuard no_grad;
  if (!is_root()) {
    Tensor master = arena_.master();  // a handle on the same buffer
    master.zero_();
  }
  comm_->comm_waits_for_compute();
  comm_->all_reduce_sum_(arena_.master());
  comm_->compute_waits_for_comm();
  arena_.refresh_working();
}

void DataParallel::before_last_backward() {
  if (grad_sync_) grad_sync_->arm();
}

void DataParallel::after_backward(const Tensor& loss_sum) {
  if (grad_sync_) grad_sync_->finish();  // ZeRO-1 over the copy engines: the last buckets' copies
  if (zero1_) zero1_->reduce_gradients();
  comm_->comm_waits_for_compute();
  comm_->all_reduce_sum_(loss_sum);
  comm_->compute_waits_for_comm();
}

void DataParallel::after_graph_replay() {
  comm_->watch_compute_stream("replay of the captured last micro-step (its gradient and loss all-reduces)");
}

ops::GradNorm DataParallel::grad_norm() {
  return zero1_ ? zero1_->grad_norm() : ops::grad_norm(arena_.grads());
}

void DataParallel::optimizer_step(double lr, int64_t step, double grad_scale, const Tensor& grad_norm) {
  FT_ASSERT(zero1_, "optimizer_step is ZeRO-1's");
  zero1_->step(lr, step, grad_scale, grad_norm);
}

void DataParallel::sync_master() {
  if (zero1_) zero1_->gather_master();
}

std::vector<NamedTensor> DataParallel::optimizer_state() {
  FT_ASSERT(zero1_, "optimizer_state is ZeRO-1's");
  return zero1_->state_tensors();
}

void DataParallel::load_optimizer_state(const std::vector<NamedTensor>& tensors) {
  FT_ASSERT(zero1_, "load_optimizer_state is ZeRO-1's");
  zero1_->load_state(tensors);
}

}  // namespace ft
