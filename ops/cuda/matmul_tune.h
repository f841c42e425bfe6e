// Choosing among cuBLASLt's candidate algorithms by timing them (FLASHTRAIN_MATMUL_TUNE).
//
// cuBLASLt's heuristic ranks its algorithms by a model of the card; its first choice is not always
// the fastest for a given shape. With FLASHTRAIN_MATMUL_TUNE set, ops::matmul asks for several
// candidates when it builds a plan and times each on the call's own operands:
//   report  time them and print one line per plan (the heuristic's time, the fastest), keep the
//           heuristic's choice: the products stay what they were
//   pick    also use the fastest, where it beats the heuristic's by more than kPickMargin
// A timing decides the algorithm, so two runs may pick differently and differ in their last bits:
// this is a measuring tool, off by default.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

namespace ft::cuda {

enum class MatmulTuneMode { kOff, kReport, kPick };

// FLASHTRAIN_MATMUL_TUNE, read once: unset or "" off, "report", "pick"; anything else is an error
// that names the variable and the values it takes.
MatmulTuneMode matmul_tune_mode();

// A pick must be this much faster than the heuristic's choice (timing noise is ~1%).
constexpr double kPickMargin = 0.02;

struct CandidateTimes {
  std::vector<double> ms;  // per candidate: median of the timed runs; negative when it failed to run
  int fastest = 0;         // index into ms
};

// Runs issue(i) for every candidate i on `stream` (one warm-up and `reps` timed runs each) and
// returns the median time of each. issue(i) returns false when candidate i cannot run (it is then
// skipped). Synchronises `stream`; must not be called while the stream is being captured.
CandidateTimes time_candidates(int count, const std::function<bool(int)>& issue, cudaStream_t stream, int reps = 5);

}  // namespace ft::cuda
