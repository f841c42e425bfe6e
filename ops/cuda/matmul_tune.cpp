#include "ops/cuda/matmul_tune.h"

#include <algorithm>
#include <cstdlib>

#include "core/cuda/check.h"
#include "core/error.h"

namespace ft::cuda {

MatmulTuneMode matmul_tune_mode() {
  static const MatmulTuneMode mode = [] {
    const char* v = std::getenv("FLASHTRAIN_MATMUL_TUNE");
    const std::string s = v ? v : "";
    if (s.empty() || s == "off") return MatmulTuneMode::kOff;
    if (s == "report") return MatmulTuneMode::kReport;
    if (s == "pick") return MatmulTuneMode::kPick;
    throw Error(str("[matmul] FLASHTRAIN_MATMUL_TUNE=", s, ": expected report, pick or off"));
  }();
  return mode;
}

CandidateTimes time_candidates(int count, const std::function<bool(int)>& issue, cudaStream_t stream, int reps) {
  CandidateTimes out;
  out.ms.assign(static_cast<size_t>(count), -1.0);
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> runs(static_cast<size_t>(reps));
  for (int i = 0; i < count; ++i) {
    if (!issue(i)) continue;  // warm-up, and the check that it runs at all
    for (int r = 0; r < reps; ++r) {
      CUDA_CHECK(cudaEventRecord(start, stream));
      issue(i);
      CUDA_CHECK(cudaEventRecord(stop, stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK(cudaEventElapsedTime(&runs[static_cast<size_t>(r)], start, stop));
    }
    std::nth_element(runs.begin(), runs.begin() + reps / 2, runs.end());
    out.ms[static_cast<size_t>(i)] = runs[static_cast<size_t>(reps / 2)];
    if (out.ms[static_cast<size_t>(out.fastest)] < 0 || out.ms[static_cast<size_t>(i)] < out.ms[static_cast<size_t>(out.fastest)])
      out.fastest = i;
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return out;
}

}  // namespace ft::cuda
