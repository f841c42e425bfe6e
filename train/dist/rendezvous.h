// The TCP rendezvous of a data-parallel job, and small collectives over it (no GPU needed).
//
// Rank 0 listens on env.master_port on all interfaces; every other rank connects to
// env.master_addr:env.master_port (retrying while rank 0 is not up yet) and says hello: a magic
// string, the protocol version, the job id, its rank and the world size. Rank 0 refuses - closes
// the connection and logs one line naming the peer address and the reason - a peer that does not
// speak the protocol (garbage, wrong magic or version, no complete hello within a short time), that
// names another job, an impossible rank (negative or >= world size), another world size, or a rank
// that has already joined. A refused peer that does speak the protocol is told why before the
// close (so a misconfigured real rank throws with rank 0's reason). Refusals never disturb the job:
// rank 0 keeps waiting for the real ranks. The constructor returns on every rank once all ranks
// have joined; rank 0 then stops listening.
//
// Timeouts: when the rendezvous does not complete within timeout_s, every rank throws ft::Error:
// rank 0 names the ranks that never arrived (and tells the connected ranks the same, so they throw
// with that message); a rank that cannot reach rank 0 says so, naming the address.
//
// After the rendezvous each rank keeps one socket to rank 0 (rank 0 keeps one per peer). The
// collectives below run as a star through rank 0 - fine for ids, scalars and tests, not for
// gradients (NCCL carries those). Every rank must call the same collectives in the same order;
// a mismatch (another collective, another element count) throws on the ranks involved. Each
// collective has the timeout and throws ft::Error naming the rank that did not answer or hung up;
// when rank 0 sees a peer fail it tells the other ranks, which throw naming that peer.
// Frames carry {type, sequence number, length} and every length is checked.
//
// Threads: the collectives, shutdown() and the destructor are for one thread at a time (the
// rank's main thread); the watchdog runs beside them and is race-free with them (see
// start_watchdog).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "train/dist/dist_env.h"

namespace ft {

class Rendezvous {
 public:
  // Blocks until every rank of env has joined (see above). `log` receives rank 0's refusal lines
  // (one line each, "flashtrain: rendezvous: refused 10.0.0.7:51234: <why>"); nullptr = std::cerr.
  // A world of 1 opens no socket; its collectives return their input.
  Rendezvous(const DistEnv& env, double timeout_s, std::ostream* log = nullptr);
  ~Rendezvous();  // shutdown(); never throws
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int rank() const;
  int world_size() const;
  double timeout_s() const;

  // Rank 0's bytes on every rank (the argument is ignored on the other ranks), e.g. the NCCL
  // unique id.
  std::vector<uint8_t> broadcast(const std::vector<uint8_t>& data_from_rank0);
  // Every rank's bytes, indexed by rank; lengths may differ between ranks.
  std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine);
  // In-place sum over ranks. Rank 0 adds in rank order (((r0 + r1) + r2) ...) and sends the result
  // back, so every rank holds bit-identical values. n must be the same on every rank.
  void all_reduce_sum(float* data, size_t n);
  void all_reduce_sum(double* data, size_t n);
  // Returns once every rank has entered it.
  void barrier();

  // Starts the health watch: a background thread (rank 0 watches every peer's socket, the others
  // watch rank 0's) that calls on_failure once, on that thread, with "rank N (host:port)
  // disconnected" / "rank 0 disconnected" (or "rank 0 aborted the job: <why>" when rank 0 reported
  // another rank's failure first) when a peer's socket closes or errors before the peer said
  // goodbye. A peer's clean shutdown() is not a failure. It never consumes collective data: it
  // polls for hang-up without the I/O lock and inspects a hung-up socket only between collectives.
  // On rank 0 it also tells the remaining peers which rank failed before calling on_failure.
  // on_failure should end the rank (e.g. std::_Exit) or flag the failure; it must not destroy this
  // object, and an exception it throws is swallowed. A world of 1 starts nothing. Calling it twice
  // throws.
  void start_watchdog(std::function<void(const std::string& why)> on_failure);

  // Stops the watchdog, sends goodbye to the peers, closes the sockets. Idempotent; never throws.
  // Collectives after shutdown() throw.
  void shutdown();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A TCP port that is free on this host right now (bind to port 0 and read it back); the local
// launcher and tests use it for MASTER_PORT.
int pick_free_port();

}  // namespace ft
