#include "train/dist/dist_abort.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace ft {
namespace {
std::mutex& abort_mutex() {
  static std::mutex* mu = new std::mutex();  // never destroyed: usable during teardown
  return *mu;
}
std::function<void()>& abort_hook() {
  static auto* hook = new std::function<void()>();
  return *hook;
}
}  // namespace

void set_dist_abort_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(abort_mutex());
  abort_hook() = std::move(hook);
}

void abort_job(int rank, const std::string& what) {
  // The first caller holds the lock until the process ends; a second watchdog blocks here.
  abort_mutex().lock();
  std::fprintf(stderr, "[dist] rank %d: %s; ending this rank (exit %d)\n", rank, what.c_str(), kDistAbortExitCode);
  std::fflush(stderr);
  if (abort_hook()) abort_hook()();
  // _Exit, not exit(): the main thread may be stuck inside a CUDA call or a socket read, and exit()
  // would run static destructors that can block on the same driver state (see the header).
  std::_Exit(kDistAbortExitCode);
}

}  // namespace ft
