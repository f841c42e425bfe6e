// Where a training step's GPU time goes, measured in the run itself (FLASHTRAIN_STEP_TIMING=1):
// CUDA events on the compute stream mark the start of the step, the end of its micro-steps
// (forward + backward, eager or replayed), the end of the data-parallel gradient sum (the compute
// stream's wait on the all-reduces that were not overlapped) and the end of the optimizer. From
// them, per step: micro-steps, exposed all-reduce, optimizer, and the GPU's idle gap before the
// step began (host time the GPU waited for: the loss read-back, the next batch, launches). Nsight
// Systems answers this too, but the GPU machines lack a working nsys; these events need nothing.
// Steps before `skip` (start-up, graph capture) are left out. A no-op when disabled or on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/device.h"

namespace ft {

class StepTimer {
 public:
  enum Mark : int { kStart = 0, kMicroSteps, kReduced, kOptimized, kMarks };

  // Enabled when FLASHTRAIN_STEP_TIMING is set to a non-zero value and `device` is a GPU.
  StepTimer(Device device, int64_t skip = 10);
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  bool enabled() const { return impl_ != nullptr; }
  void mark(Mark m);  // record the event of `m` for the current step (kStart begins a step)
  // Data parallel with the gradient reduction inside the captured step (ZeRO-1 over the copy
  // engines): where this rank's backward ends, just before the reduction's tail (the last copies,
  // the collective that waits for every rank). Recorded as an external event node when the stream
  // is capturing, so every replay records it; the summary then splits the micro-steps into the
  // backward and what follows it. If the driver cannot time it, the split is left out.
  void mark_backward_done();
  // Mean ms per step of each phase over the timed steps, one line; "" when disabled or no step ran.
  std::string summary();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ft
