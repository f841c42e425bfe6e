// `flashtrain train CONFIG --nproc N`: N processes on this host, one per GPU, each joining the job
// through the torchrun-style environment (train/dist/dist_env.h).
#pragma once

#include <cstdlib>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace ft {

struct LaunchOptions {
  std::string exe = "/proc/self/exe";  // the program each rank runs (tests run /bin/sh)
  double grace_s = 10.0;               // SIGTERM -> SIGKILL delay when stopping the ranks
  int master_port = 0;                 // 0 = pick a free port (one node only)
  // Several hosts ("nodes", issue 20), as torchrun's --nnodes / --node-rank: one launcher per
  // host, each starting nproc ranks; this one starts global ranks node_rank * nproc + (0..nproc-1)
  // of WORLD_SIZE = nnodes * nproc, with LOCAL_RANK 0..nproc-1. Every node's ranks meet at
  // master_addr:master_port (the rendezvous of global rank 0, on node 0), which must then be set
  // to the same values on every node; job_id (the same on every node) defaults to
  // "flashtrain-nodes@<master_addr>:<master_port>".
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::string job_id;
};

// The node options from the environment, torchrun's names: NNODES, NODE_RANK, MASTER_ADDR,
// MASTER_PORT, and FLASHTRAIN_JOB_ID for the job id. Nothing set: one node (defaults above). With
// NNODES > 1, MASTER_ADDR and MASTER_PORT are required. A bad value throws a one-line ft::Error
// naming the variable and the value.
LaunchOptions node_launch_options(const std::function<const char*(const char*)>& getenv_fn = ::getenv);

// Starts nproc copies of options.exe with argv = {exe, child_args...} (for flashtrain: the train
// command's arguments minus --nproc), each with the launcher's environment plus RANK, WORLD_SIZE,
// LOCAL_RANK (= RANK), MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port), FLASHTRAIN_JOB_ID (fresh
// per launch) and FLASHTRAIN_LAUNCHER=flashtrain (several nodes: the global values above); CUDA_VISIBLE_DEVICES is left as it is (each
// rank takes GPU local_rank itself). The children share stdout and stderr with the launcher, and
// get SIGTERM if the launcher dies (PR_SET_PDEATHSIG).
//
// Waits for all of them. When a rank exits non-zero or by a signal it writes to `log`
// "flashtrain: rank R exited with status S; stopping the other ranks" (or "... with signal
// SIGNAME; ..."), sends SIGTERM to the ranks still running, SIGKILL after grace_s, and returns that
// rank's status (128 + signal number for a signal). SIGINT/SIGTERM sent to the launcher while it
// waits are forwarded to the ranks (then the same grace applies) and it returns 128 + signal.
// Returns 0 when every rank exits 0. Throws ft::Error for nproc < 1 or when fork fails; a rank
// whose exec fails exits 127.
int launch_local(int nproc, const std::vector<std::string>& child_args, std::ostream& log,
                 const LaunchOptions& options = {});

// The train command's arguments as a child must get them: "--nproc N" / "--nproc=N" removed.
std::vector<std::string> without_nproc(const std::vector<std::string>& args);

}  // namespace ft
