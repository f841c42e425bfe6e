#include "train/dist/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cuda/check.h"
#include "train/dist/dist_abort.h"
#include "train/dist/rendezvous.h"

namespace ft {
namespace {

using Clock = std::chrono::steady_clock;

// Names the call, the rank and NCCL's own words for what went wrong.
#define NCCL_CHECK_RANK(call, comm, rank)                                                               \
  do {                                                                                                \
    const ncclResult_t ft_nr_ = (call);                                                               \
    if (ft_nr_ != ncclSuccess && ft_nr_ != ncclInProgress) {                                          \
      const char* ft_last_ = ncclGetLastError(comm);                                                  \
      throw ::ft::Error(::ft::str("[dist] rank ", rank, ": NCCL error ", ncclGetErrorString(ft_nr_),  \
                                  " in ", #call, (ft_last_ && *ft_last_ ? " (" : ""),                \
                                  (ft_last_ ? ft_last_ : ""), (ft_last_ && *ft_last_ ? ")" : "")));   \
    }                                                                                                 \
  } while (0)

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Rendezvous& rdv, int rank, int world, Device device, double timeout_s)
      : rank_(rank), world_(world), device_(device), timeout_(std::chrono::duration<double>(timeout_s)) {
    FT_CHECK_ARG(device.is_cuda(), "[dist] the NCCL communicator needs a CUDA device, got ", device);
    CUDA_CHECK(cudaSetDevice(device.index));
    compute_ = stream_for(device);
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_mark_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&comm_mark_, cudaEventDisableTiming));

    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank == 0) NCCL_CHECK_RANK(ncclGetUniqueId(&id), nullptr, rank_);
    const std::vector<uint8_t> mine(reinterpret_cast<const uint8_t*>(&id), reinterpret_cast<const uint8_t*>(&id) + sizeof id);
    const std::vector<uint8_t> got = rdv.broadcast(mine);
    FT_CHECK_ARG(got.size() == sizeof id, "[dist] rank ", rank, ": the NCCL unique id from rank 0 has ", got.size(),
                 " bytes, expected ", sizeof id);
    std::memcpy(&id, got.data(), sizeof id);

    // The monitor starts before ncclCommInitRank, which blocks until every rank has joined: a rank
    // that never calls it must not hang the others forever.
    monitor_ = std::thread([this] { monitor_loop(); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      host_phase_ = "ncclCommInitRank (a rank did not join the NCCL communicator)";
      host_phase_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout_);
    }
    try {
      NCCL_CHECK_RANK(ncclCommInitRank(&comm_, world, id, rank), comm_, rank_);
    } catch (...) {
      stop_monitor();  // a joinable std::thread must not outlive a throwing constructor
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      host_phase_.clear();
      comm_ready_ = true;
    }
    set_dist_abort_hook([this] { ncclCommAbort(comm_); });
  }

  ~NcclCommunicator() override {
    // Wait for what is enqueued while the monitor still runs: when this rank leaves by an exception
    // with collectives in flight that a peer will never join, the wait ends in the timeout's abort
    // instead of hanging the exit.
    cudaStreamSynchronize(comm_stream_);
    stop_monitor();
    set_dist_abort_hook(nullptr);
    if (comm_) ncclCommDestroy(comm_);
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    for (const Pending& p : pending_) cudaEventDestroy(p.event);
    cudaEventDestroy(compute_mark_);
    cudaEventDestroy(comm_mark_);
    cudaStreamDestroy(comm_stream_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  const char* backend() const override { return "nccl"; }

  void all_reduce_sum_(const Tensor& t) override {
    check_collective_tensor("all_reduce_sum_", t, device_);
    if (t.numel() == 0) return;
    NCCL_CHECK_RANK(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), nccl_type(t), ncclSum,
                                  comm_, comm_stream_),
                    comm_, rank_);
    track("all-reduce of " + std::to_string(t.numel()) + elements(t));
  }

  void reduce_scatter_sum(const Tensor& in, const Tensor& out) override {
    check_collective_tensor("reduce_scatter_sum", in, device_);
    check_collective_tensor("reduce_scatter_sum", out, device_);
    check_world_multiple("reduce_scatter_sum", "in", in, "out", out, world_);
    if (out.numel() == 0) return;
    // In place when out is in's rank-th slice (NCCL's documented in-place form).
    NCCL_CHECK_RANK(ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(out.numel()), nccl_type(in),
                                      ncclSum, comm_, comm_stream_),
                    comm_, rank_);
    track("reduce-scatter of " + std::to_string(in.numel()) + elements(in));
  }

  void all_gather(const Tensor& in, const Tensor& out) override {
    check_collective_tensor("all_gather", in, device_, /*moves_only=*/true);
    check_collective_tensor("all_gather", out, device_, /*moves_only=*/true);
    check_world_multiple("all_gather", "out", out, "in", in, world_);
    if (in.numel() == 0) return;
    NCCL_CHECK_RANK(ncclAllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()), nccl_type(in), comm_,
                                  comm_stream_),
                    comm_, rank_);
    track("all-gather of " + std::to_string(out.numel()) + elements(out));
  }

  void comm_waits_for_compute() override {
    CUDA_CHECK(cudaEventRecord(compute_mark_, compute_));
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, compute_mark_, 0));
  }

  void compute_waits_for_comm() override {
    CUDA_CHECK(cudaEventRecord(comm_mark_, comm_stream_));
    CUDA_CHECK(cudaStreamWaitEvent(compute_, comm_mark_, 0));
  }

  void watch_compute_stream(const std::string& what) override { track(what, compute_); }

  void barrier() override {
    if (!barrier_word_.defined()) barrier_word_ = Tensor::zeros({1}, DType::F32, device_);
    comm_waits_for_compute();
    all_reduce_sum_(barrier_word_);
    // Bounded by the monitor: a peer that never arrives ends the job after the timeout.
    CUDA_CHECK(cudaStreamSynchronize(comm_stream_));
  }

 private:
  // f32, f16 (all-gather only), or bf16 (checked by check_collective_tensor), which NCCL has since 2.10.
  ncclDataType_t nccl_type(const Tensor& t) const {
    if (t.dtype() == DType::F32) return ncclFloat;
    if (t.dtype() == DType::F16) return ncclHalf;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    return ncclBfloat16;
#else
    FT_CHECK_ARG(false, "[dist] rank ", rank_, ": bf16 collectives need NCCL >= 2.10 (grad_reduce_dtype: fp32, or "
                 "mixed_precision: fp32 with zero1)");
    return ncclFloat;
#endif
  }
  static const char* elements(const Tensor& t) {
    return t.dtype() == DType::BF16 ? " bf16" : t.dtype() == DType::F16 ? " f16" : " floats";
  }

  struct Pending {
    cudaEvent_t event;
    Clock::time_point enqueued;
    std::string what;
  };

  void stop_monitor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (monitor_.joinable()) monitor_.join();
  }

  // Records an event after the collective just enqueued (on `stream`, the comm stream by default),
  // for the monitor to watch. Not while the stream is being captured into a CUDA graph: an event
  // recorded there marks a graph node, not a point in time, and querying it from the monitor
  // would fail; the replays are watched through watch_compute_stream instead.
  void track(std::string what, cudaStream_t stream = nullptr) {
    if (!stream) stream = comm_stream_;
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) return;
    cudaEvent_t e = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_events_.empty()) {
        e = free_events_.back();
        free_events_.pop_back();
      }
    }
    if (!e) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(e, stream));
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({e, Clock::now(), std::move(what)});
  }

  void monitor_loop() {
    cudaSetDevice(device_.index);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (stop_) break;
      const auto now = Clock::now();
      if (!host_phase_.empty() && now > host_phase_deadline_)
        fail(str(host_phase_, ": not done after ", timeout_.count(), " s (dist_timeout_s)"));
      // Completed collectives leave the queue in order; the oldest unfinished one is the one that
      // can have timed out.
      while (!pending_.empty()) {
        const cudaError_t q = cudaEventQuery(pending_.front().event);
        if (q == cudaErrorNotReady) break;
        if (q != cudaSuccess)
          fail(str("CUDA error ", cudaGetErrorName(q), " while waiting for NCCL ", pending_.front().what));
        free_events_.push_back(pending_.front().event);
        pending_.pop_front();
      }
      if (!pending_.empty() && now - pending_.front().enqueued > timeout_)
        fail(str("NCCL ", pending_.front().what, " did not complete within ", timeout_.count(),
                 " s (dist_timeout_s): a peer rank is gone or stuck"));
      if (comm_ready_) {
        ncclResult_t async = ncclSuccess;
        const ncclResult_t r = ncclCommGetAsyncError(comm_, &async);
        if (r != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
          const char* last = ncclGetLastError(comm_);
          fail(str("NCCL asynchronous error ", ncclGetErrorString(r != ncclSuccess ? r : async),
                   (last && *last ? str(" (", last, ")") : std::string())));
        }
      }
    }
  }

  // On the monitor thread, with mu_ held: abort_job runs the abort hook (ncclCommAbort, so the
  // peers' collectives with this rank fail too) and ends the process with std::_Exit, the right
  // way out here because the main thread may be stuck inside a CUDA or NCCL call forever.
  [[noreturn]] void fail(const std::string& what) { abort_job(rank_, what); }

  int rank_, world_;
  Device device_;
  std::chrono::duration<double> timeout_;
  cudaStream_t compute_ = nullptr, comm_stream_ = nullptr;
  cudaEvent_t compute_mark_ = nullptr, comm_mark_ = nullptr;
  ncclComm_t comm_ = nullptr;
  Tensor barrier_word_;

  std::thread monitor_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> comm_ready_{false};
  std::string host_phase_;
  Clock::time_point host_phase_deadline_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Rendezvous& rendezvous, int rank, int world_size, Device device,
                                                     double timeout_s) {
  return std::make_unique<NcclCommunicator>(rendezvous, rank, world_size, device, timeout_s);
}

}  // namespace ft
