#include "train/step_timer.h"

#include <cstdlib>
#include <sstream>

#if FT_WITH_CUDA
#include <cuda_runtime.h>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#endif

namespace ft {

#if FT_WITH_CUDA
// Two sets of events: step k records into one while step k - 1's are read.
struct StepTimer::Impl {
  cudaStream_t stream = nullptr;
  cudaEvent_t ev[2][kMarks] = {};
  int64_t step = -1, skip = 0, timed = 0;
  double sum[kMarks] = {};  // [0]: idle gap before the step; [m]: phase ending at mark m
  bool have_prev = false;
  // mark_backward_done: one event (a captured graph records the event it was captured with).
  cudaEvent_t backward = nullptr;
  bool backward_marked = false, split_ok = true;
  double sum_backward = 0, sum_after_backward = 0;
  int64_t split_timed = 0;

  // This step's start -> backward done -> end of micro-steps (all complete by kOptimized).
  void accumulate_split(int cur) {
    float a = 0, b = 0;
    if (cudaEventElapsedTime(&a, ev[cur][kStart], backward) != cudaSuccess ||
        cudaEventElapsedTime(&b, backward, ev[cur][kMicroSteps]) != cudaSuccess) {
      cudaGetLastError();  // clear it: the split is optional
      split_ok = false;
      return;
    }
    sum_backward += a;
    sum_after_backward += b;
    ++split_timed;
  }

  void accumulate(int cur) {
    const int prev = cur ^ 1;
    float ms = 0;
    // Phases of the previous step, and the gap from its end to this step's start.
    for (int m = kMicroSteps; m < kMarks; ++m) {
      CUDA_CHECK(cudaEventElapsedTime(&ms, ev[prev][m - 1], ev[prev][m]));
      sum[m] += ms;
    }
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev[prev][kOptimized], ev[cur][kStart]));
    sum[0] += ms;
    ++timed;
  }
};

StepTimer::StepTimer(Device device, int64_t skip) {
  const char* env = std::getenv("FLASHTRAIN_STEP_TIMING");
  if (!device.is_cuda() || env == nullptr || std::string(env).empty() || std::string(env) == "0") return;
  impl_ = std::make_unique<Impl>();
  impl_->stream = cuda::context(device.index).stream;
  impl_->skip = skip;
  for (auto& set : impl_->ev)
    for (auto& e : set) CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventCreate(&impl_->backward));
}

StepTimer::~StepTimer() {
  if (!impl_) return;
  for (auto& set : impl_->ev)
    for (auto& e : set) cudaEventDestroy(e);
  cudaEventDestroy(impl_->backward);
}

void StepTimer::mark(Mark m) {
  if (!impl_) return;
  Impl& s = *impl_;
  if (m == kStart) ++s.step;
  const int cur = static_cast<int>(s.step & 1);
  CUDA_CHECK(cudaEventRecord(s.ev[cur][m], s.stream));
  // By the optimizer's mark the trainer has read this step's loss back (a sync after kReduced),
  // so the previous step's events and this step's start are complete: reading them waits for
  // nothing, and the timer adds no synchronisation of its own.
  if (m == kOptimized && s.step > s.skip) {
    s.accumulate(cur);
    if (s.backward_marked && s.split_ok) s.accumulate_split(cur);
  }
}

void StepTimer::mark_backward_done() {
  if (!impl_) return;
  Impl& s = *impl_;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(s.stream, &capture));
  if (capture == cudaStreamCaptureStatusActive) {
    CUDA_CHECK(cudaEventRecordWithFlags(s.backward, s.stream, cudaEventRecordExternal));
  } else {
    CUDA_CHECK(cudaEventRecord(s.backward, s.stream));
  }
  s.backward_marked = true;
}

std::string StepTimer::summary() {
  if (!impl_ || impl_->timed == 0) return "";
  const Impl& s = *impl_;
  const double n = static_cast<double>(s.timed);
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "step timing over " << s.timed << " steps (ms per step): idle before the step " << s.sum[0] / n
    << ", micro-steps " << s.sum[kMicroSteps] / n << ", gradient sum (exposed) " << s.sum[kReduced] / n
    << ", grad norm + optimizer " << s.sum[kOptimized] / n << ", total "
    << (s.sum[0] + s.sum[kMicroSteps] + s.sum[kReduced] + s.sum[kOptimized]) / n;
  if (s.split_ok && s.split_timed > 0) {
    const double k = static_cast<double>(s.split_timed);
    o << "; micro-steps to the end of the backward " << s.sum_backward / k
      << ", after it (last copies, the collectives, waiting for the other ranks) " << s.sum_after_backward / k;
  } else if (s.backward_marked && !s.split_ok) {
    o << "; the backward's end could not be timed inside the captured step";
  }
  return o.str();
}

#else

struct StepTimer::Impl {};
StepTimer::StepTimer(Device, int64_t) {}
StepTimer::~StepTimer() = default;
void StepTimer::mark(Mark) {}
void StepTimer::mark_backward_done() {}
std::string StepTimer::summary() { return ""; }

#endif

}  // namespace ft
