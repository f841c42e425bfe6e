// Copies between the GPUs of one host's ranks on the copy engines (CUDA IPC), for data motion that
// must not take SM time from the compute beside it.
//
// Why (issue 20, bench/train/NOTES.md session 19): NCCL's collectives run as kernels on the SMs; on
// 2 H100s a GPT-2-sized matmul beside back-to-back NCCL all-reduces ran 30% slower and a GELU pass
// 18% (a one-thread resident CTA alone costs the matmul 10%), while 25 MiB peer copies beside them
// cost nothing (+0.2% / -0.4%). So a gradient sum overlapped with the backward over NCCL costs
// about what it hides; over the copy engines it does not.
//
// Each rank exports an inbox (a device tensor it owns) to every other rank; send() copies from this
// rank's device memory into another rank's inbox on the exchange's own stream, ordered after the
// compute stream's work up to the last sends_wait_for_compute(). Completion across ranks is the
// caller's: compute_waits_for_sends() orders this rank's sends before later compute-stream work,
// so a collective issued after it on every rank (through Communicator's comm/compute ordering)
// tells each rank that every peer's sends into its inbox are done.
// Everything is capturable into a CUDA graph (event fork and join, memcpy nodes).
//
// Built with NCCL (CUDA) only; elsewhere the constructor throws.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "train/dist/communicator.h"

namespace ft {

class PeerExchange {
 public:
  // Collective: every rank calls it, each with its own inbox (contiguous, on this rank's GPU; the
  // exchange keeps a handle on it). Throws, naming the reason, when the ranks are not all on this
  // host or their GPUs cannot map each other's memory -- on every rank alike (they agree through
  // one collective), so callers may fall back to NCCL together.
  PeerExchange(Communicator& comm, const Tensor& inbox);
  ~PeerExchange();
  PeerExchange(const PeerExchange&) = delete;
  PeerExchange& operator=(const PeerExchange&) = delete;

  const Tensor& inbox() const { return inbox_; }
  // The exchange's stream waits for the compute stream's work so far (call before sending data the
  // compute stream just wrote).
  void sends_wait_for_compute();
  // `bytes` from `src` (this rank's device memory) to byte `offset` of rank `to`'s inbox.
  void send(int to, int64_t offset, const void* src, int64_t bytes);
  // The compute stream waits for every send so far.
  void compute_waits_for_sends();

 private:
  void release();  // unmaps the peers and frees the streams (idempotent)

  struct Impl;
  std::unique_ptr<Impl> impl_;
  Tensor inbox_;
};

}  // namespace ft
