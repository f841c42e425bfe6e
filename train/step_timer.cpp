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
}

StepTimer::~StepTimer() {
  if (!impl_) return;
  for (auto& set : impl_->ev)
    for (auto& e : set) cudaEventDestroy(e);
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
  if (m == kOptimized && s.step > s.skip) s.accumulate(cur);
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
  return o.str();
}

#else

struct StepTimer::Impl {};
StepTimer::StepTimer(Device, int64_t) {}
StepTimer::~StepTimer() = default;
void StepTimer::mark(Mark) {}
std::string StepTimer::summary() { return ""; }

#endif

}  // namespace ft
