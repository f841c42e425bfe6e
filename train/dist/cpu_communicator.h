// Collectives over the job's Rendezvous sockets, for data parallelism on CPUs (tests, CI, a laptop):
// the same interface as NCCL (train/dist/communicator.h), synchronous, every result bit-identical on
// every rank (rank 0 sums in rank order). The traffic runs as a star through rank 0, so it is
// for small models; GPUs use NcclCommunicator.
#pragma once

#include "train/dist/communicator.h"
#include "train/dist/rendezvous.h"

namespace ft {

class CpuCommunicator final : public Communicator {
 public:
  // The Rendezvous must outlive the communicator.
  explicit CpuCommunicator(Rendezvous& rendezvous) : rdv_(rendezvous) {}

  int rank() const override { return rdv_.rank(); }
  int world_size() const override { return rdv_.world_size(); }
  const char* backend() const override { return "cpu"; }

  // f32, or bf16 summed in fp32 and rounded once (communicator.h).
  void all_reduce_sum_(const Tensor& t) override;
  // A full all-reduce, then the rank's slice: twice the traffic of a true reduce-scatter, the same
  // numbers (sums are formed once, on rank 0). In place when out is in's rank-th slice.
  void reduce_scatter_sum(const Tensor& in, const Tensor& out) override;
  void all_gather(const Tensor& in, const Tensor& out) override;
  void comm_waits_for_compute() override {}
  void compute_waits_for_comm() override {}
  void barrier() override { rdv_.barrier(); }

 private:
  Rendezvous& rdv_;
};

}  // namespace ft
