// Ending a data-parallel job from a watchdog thread.
//
// When a peer dies, a collective times out or NCCL reports an asynchronous error, the main thread
// may be blocked inside a CUDA or NCCL call or a socket read that will never return, so throwing
// an ft::Error is not an option: the watchdog prints "[dist] rank R: <what failed>" and ends the
// process with std::_Exit (no static destructors, which could block on the same stuck driver).
// This is the one place in the library that ends the process; every other error throws.
#pragma once

#include <functional>
#include <string>

namespace ft {

// The exit status of a job ended by abort_job.
constexpr int kDistAbortExitCode = 3;

// Runs before the process ends (the NCCL communicator registers ncclCommAbort, so peers blocked in
// a collective with this rank see an error instead of waiting). One hook; an empty function clears.
void set_dist_abort_hook(std::function<void()> hook);

// Prints, runs the hook (once, even if several threads get here), ends the process. Never returns.
[[noreturn]] void abort_job(int rank, const std::string& what);

}  // namespace ft
