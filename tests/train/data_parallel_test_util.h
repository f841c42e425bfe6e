// Runs a data-parallel job inside a test: each rank a fork()ed child of the test binary with the
// torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT,
// FLASHTRAIN_JOB_ID) set, a Trainer of its own and a real Rendezvous on 127.0.0.1. A child
// reports its losses, final master weights and an optional probe through a file, then _exit()s
// (no gtest teardown in children). The parent's environment is never touched, so run_single
// builds an ordinary one-process Trainer.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "train/dist/rendezvous.h"
#include "train/trainer.h"

namespace ft::test {

struct RankRun {
  int status = -1;  // exit status (128 + signal when killed)
  std::string error;
  std::vector<double> losses;
  std::vector<float> master;
  std::vector<float> probe;
};

// Called on the constructed Trainer before run(); its floats come back in RankRun::probe.
using Probe = std::function<std::vector<float>(Trainer&)>;

namespace dp_detail {

// Named after the test process; children get `parent` from before the fork (their getpid differs).
inline std::string result_path(int rank, pid_t parent = ::getpid()) {
  return (std::filesystem::temp_directory_path() /
          ("ft_dp_result_" + std::to_string(parent) + "_" + std::to_string(rank)))
      .string();
}

template <class T>
void put_vec(std::ofstream& f, const std::vector<T>& v) {
  const uint64_t n = v.size();
  f.write(reinterpret_cast<const char*>(&n), sizeof n);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
}
template <class T>
std::vector<T> get_vec(std::ifstream& f) {
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), sizeof n);
  std::vector<T> v(static_cast<size_t>(n));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  return v;
}

inline RankRun run_trainer(const TrainConfig& cfg, const Probe& probe, const TrainerOptions& opts) {
  RankRun r;
  try {
    Trainer t(cfg, opts);
    if (probe) r.probe = probe(t);
    r.losses = t.run().losses;
    r.master = t.arena().master().to_floats();
    r.status = 0;
  } catch (const std::exception& e) {
    r.error = e.what();
    r.status = 1;
  }
  return r;
}

inline int status_of(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return -1;
}

// In the child: the job's environment, then `body`; never returns.
[[noreturn]] inline void child(int rank, int world, int port, const std::string& job, const std::string& stderr_path,
                               const std::function<int()>& body) {
  if (!stderr_path.empty() && !std::freopen(stderr_path.c_str(), "w", stderr)) std::_Exit(120);
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("FLASHTRAIN_JOB_ID", job.c_str(), 1);
  int status = 1;
  try {
    status = body();
  } catch (...) {
  }
  std::fflush(stderr);
  std::_Exit(status);
}

inline std::vector<pid_t> fork_ranks(int world, const std::function<int(int)>& body,
                                     const std::vector<std::string>& stderr_paths = {}) {
  static int launches = 0;
  const int port = pick_free_port();
  const std::string job = "dp-test-" + std::to_string(::getpid()) + "-" + std::to_string(launches++);
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int r = 0; r < world; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw Error("fork failed");
    if (pid == 0)
      child(r, world, port, job, r < static_cast<int>(stderr_paths.size()) ? stderr_paths[r] : "",
            [&] { return body(r); });
    pids.push_back(pid);
  }
  return pids;
}

// Waits for pid until the deadline; -1 when it is still running then.
inline int wait_until(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int ws = 0;
    const pid_t got = ::waitpid(pid, &ws, WNOHANG);
    if (got == pid) return status_of(ws);
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace dp_detail

inline RankRun run_single(const TrainConfig& cfg, const Probe& probe, const TrainerOptions& opts = {}) {
  return dp_detail::run_trainer(cfg, probe, opts);
}

// `world` ranks of `cfg` (batch_size is per rank); each rank's result, in rank order. A job that
// is not done in timeout_s is killed (status -1 and an error saying so).
inline std::vector<RankRun> run_ranks(const TrainConfig& cfg, int world, const Probe& probe,
                                      const TrainerOptions& opts = {}, double timeout_s = 60) {
  using namespace dp_detail;
  const pid_t parent = ::getpid();
  const std::vector<pid_t> pids = fork_ranks(world, [&](int rank) {
    const RankRun r = run_trainer(cfg, probe, opts);
    if (r.status != 0) std::fprintf(stderr, "rank %d: error: %s\n", rank, r.error.c_str());
    std::ofstream f(result_path(rank, parent), std::ios::binary);
    const uint64_t elen = r.error.size();
    f.write(reinterpret_cast<const char*>(&elen), sizeof elen);
    f.write(r.error.data(), static_cast<std::streamsize>(elen));
    put_vec(f, r.losses);
    put_vec(f, r.master);
    put_vec(f, r.probe);
    f.close();
    return r.status;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                std::chrono::duration<double>(timeout_s));
  std::vector<RankRun> out(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    out[r].status = wait_until(pids[r], deadline);
    if (out[r].status == -1) {
      ::kill(pids[r], SIGKILL);
      ::waitpid(pids[r], nullptr, 0);
      out[r].error = "rank " + std::to_string(r) + " still running after " + std::to_string(timeout_s) + " s: killed";
      continue;
    }
    std::ifstream f(result_path(r), std::ios::binary);
    if (!f) {
      if (out[r].error.empty()) out[r].error = "rank " + std::to_string(r) + " wrote no result";
      continue;
    }
    uint64_t elen = 0;
    f.read(reinterpret_cast<char*>(&elen), sizeof elen);
    std::string err(static_cast<size_t>(elen), '\0');
    f.read(err.data(), static_cast<std::streamsize>(elen));
    if (out[r].error.empty()) out[r].error = err;
    out[r].losses = get_vec<double>(f);
    out[r].master = get_vec<float>(f);
    out[r].probe = get_vec<float>(f);
    f.close();
    std::filesystem::remove(result_path(r));
  }
  return out;
}

struct KillResult {
  int survivor_status = -1;  // rank 0's
  bool survivor_timed_out = false;
  std::string survivor_stderr;
};

// Starts the job, SIGKILLs rank `victim` after after_s, and waits up to wait_s for rank 0.
inline KillResult run_ranks_and_kill(const TrainConfig& cfg, int world, int victim, double after_s, double wait_s) {
  using namespace dp_detail;
  std::vector<std::string> errs;
  for (int r = 0; r < world; ++r) errs.push_back(result_path(r) + ".stderr");
  const std::vector<pid_t> pids = fork_ranks(
      world,
      [&](int rank) {
        const RankRun r = run_trainer(cfg, {}, {});
        if (r.status != 0) std::fprintf(stderr, "rank %d: error: %s\n", rank, r.error.c_str());
        return r.status;
      },
      errs);
  std::this_thread::sleep_for(std::chrono::duration<double>(after_s));
  ::kill(pids[victim], SIGKILL);
  ::waitpid(pids[victim], nullptr, 0);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait_s));
  KillResult k;
  for (int r = 0; r < world; ++r) {
    if (r == victim) continue;
    const int st = wait_until(pids[r], deadline);
    if (st == -1) {
      ::kill(pids[r], SIGKILL);
      ::waitpid(pids[r], nullptr, 0);
      if (r == 0) k.survivor_timed_out = true;
    }
    if (r == 0) k.survivor_status = st;
  }
  std::ifstream f(errs[0]);
  k.survivor_stderr.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  for (const std::string& p : errs) std::filesystem::remove(p);
  return k;
}

}  // namespace ft::test
