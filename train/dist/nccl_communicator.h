// Collectives over NCCL, one process per GPU (train/dist/communicator.h has the contract).
//
// Set-up: rank 0 makes the NCCL unique id and broadcasts it over the job's Rendezvous; every rank
// then calls ncclCommInitRank on its GPU. Collectives run on the communicator's own non-blocking
// stream of the highest priority, so gradient buckets overtake backward kernels queued behind them.
//
// Watchdog (issue 7: never a silent hang). A monitor thread
//   * gives the start-up (ncclCommInitRank) timeout_s to complete;
//   * tracks every enqueued collective by an event recorded after it and polls
//     ncclCommGetAsyncError; a collective still unfinished timeout_s after it was enqueued, or an
//     asynchronous NCCL error, calls ncclCommAbort and ends the process non-zero after printing
//     "[dist] rank R: <what failed>";
// and the Rendezvous watchdog (a peer's control connection dropping) does the same through
// abort_job() (train/dist/dist_abort.h), for which the communicator registers its ncclCommAbort. Errors of the calls themselves throw ft::Error naming the call, the rank and NCCL's
// last error text.
//
// Built only with FT_NCCL; without it make_nccl_communicator throws "[dist] built without NCCL".
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "train/dist/communicator.h"

namespace ft {

class Rendezvous;

// `device` is this rank's GPU (cuda:local_rank). The Rendezvous must outlive the communicator.
std::unique_ptr<Communicator> make_nccl_communicator(Rendezvous& rendezvous, int rank, int world_size, Device device,
                                                     double timeout_s);

}  // namespace ft
