// The collectives data parallelism needs, over flat contiguous tensors of one device, behind one
// interface so the trainer, GradSync and ZeRO-1 do not care whether NCCL or the CPU rendezvous
// sockets carry them.
//
// Streams (CUDA). Collectives run on the communicator's own stream, not the compute stream, so a
// gradient bucket can be reduced while the backward pass goes on. The caller orders the two:
//   comm_waits_for_compute()  the comm stream waits for everything issued on the compute stream so
//                             far (record an event there, wait on it) -- call before launching a
//                             collective on data the compute stream just wrote;
//   compute_waits_for_comm()  the compute stream waits for every collective enqueued so far --
//                             call before the compute stream reads their results.
// Neither blocks the host. Tensors handed to a collective must stay alive until the compute stream
// has waited for it (the caching allocator reuses a freed block in compute-stream order only).
//
// CPU: every call completes before it returns; the two ordering calls do nothing.
//
// Faults: a collective that does not complete within the configured timeout, or a peer that dies,
// ends the process with a message naming the rank and what failed (see the implementations).
#pragma once

#include <string>

#include "core/tensor.h"

namespace ft {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual const char* backend() const = 0;  // "nccl" | "cpu"

  // t = sum over ranks of t, in place. t: contiguous f32 (any numel, a one-element norm too) or
  // bf16 (gradients on a half-width wire, issue 20): NCCL adds bf16 pairs in fp32 and rounds each
  // partial sum to bf16; the CPU sockets sum the widened values in fp32 and round once. With two
  // ranks both are round(a + b).
  virtual void all_reduce_sum_(const Tensor& t) = 0;
  // out (numel n) = the rank's n-slice [rank*n, (rank+1)*n) of the sum over ranks of in
  // (numel world_size*n). Contiguous f32, or bf16 for both (summed as all_reduce_sum_ sums bf16).
  // out may be in's own rank-th slice (in place, as ZeRO-1 does on the gradient arena); no other
  // overlap.
  virtual void reduce_scatter_sum(const Tensor& in, const Tensor& out) = 0;
  // out (numel world_size*n) = every rank's in (numel n) in rank order. in may be out's own slice
  // [rank*n, (rank+1)*n) (in-place all-gather). Contiguous f32, or bf16 / f16 for both (ZeRO-1's
  // working copy).
  virtual void all_gather(const Tensor& in, const Tensor& out) = 0;

  virtual void comm_waits_for_compute() = 0;
  virtual void compute_waits_for_comm() = 0;

  // CUDA graphs. Collectives issued while the compute stream is being captured become graph nodes
  // (NCCL >= 2.9); they run at every replay, where no per-call watchdog event can see them. After
  // a replay the caller names what the replayed graph holds: an event recorded now on the compute
  // stream is watched like a collective, so a peer that dies mid-replay still ends this rank
  // within the timeout. CPU: nothing to watch.
  virtual void watch_compute_stream(const std::string& what) { (void)what; }

  // Every rank arrives here before any leaves (host-side; waits for the collectives enqueued).
  virtual void barrier() = 0;
};

// Checks shared by the implementations: contiguous f32 or bf16 (also f16 where moves_only: a
// collective that adds nothing, the all-gather) on `device`, the numel relation. `op` names the
// collective in the message.
void check_collective_tensor(const char* op, const Tensor& t, Device device, bool moves_only = false);
// reduce_scatter_sum / all_gather: `whole` holds world_size times the elements of `part`, of the
// same dtype.
void check_world_multiple(const char* op, const char* whole_name, const Tensor& whole, const char* part_name,
                          const Tensor& part, int world_size);

}  // namespace ft
