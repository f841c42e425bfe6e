// `flashtrain compare CONFIG` (train/cli/compare_command.cpp): the same training run twice, flash
// and naive attention, from the same initial weights, data order and dropout seeds, then a report
// of the two side by side (train/report/report_compare.h) and a check that the loss curves agree
// to rounding. This file holds the comparison; the command runs it.
//
// Why they must agree: both attentions compute the same function with identical dropout masks
// (ops/attention.h), so the runs differ only by floating-point rounding (and, on CUDA, the order of
// flash's dQ atomics). On the CPU in fp32 both run the same float64 reference, so the curves are
// bit-identical there.
#pragma once

#include <cmath>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/device.h"
#include "train/config/config.h"

namespace ft {

struct MetricsRecord {
  int64_t step = 0;
  bool has_loss = false, has_val = false, has_tps = false;
  double loss = 0, val_loss = 0, tokens_per_s = 0;
};

// Records of a metrics.jsonl file, or of <dir>/metrics.jsonl when `path` is a directory. When a
// step appears twice (a run resumed without truncation), the later record wins.
std::vector<MetricsRecord> read_metrics(const std::string& path);

// One variant's run, as the report shows it.
struct VariantResult {
  std::string name;                 // "flash" | "naive"
  std::vector<double> step_losses;  // the training loss of every step, step 1 first
  std::vector<MetricsRecord> metrics;  // its metrics.jsonl
  double final_loss = NAN;
  double val_loss = NAN;       // the last evaluation; NaN without one
  double tokens_per_s = 0;     // median of the logged per-interval rates (see below)
  double ms_per_step = 0;      // tokens_per_step / tokens_per_s
  double seconds = 0;          // wall time of the whole run (evaluations and checkpoints included)
  int64_t peak_bytes = -1;     // the allocator's peak during the run
  bool peak_on_device = false; // the CUDA caching allocator (else the CPU allocator: host memory)
};

// The median of the tokens_per_s records: the logged intervals that hold an evaluation or a
// checkpoint, and step 1's warm-up, are slower; the median leaves them out without a rule per case.
double median_tokens_per_s(const std::vector<MetricsRecord>& metrics);

// How far apart the two loss curves are, relative: |flash - naive| / |naive|.
//
// The checked figure compares the training curves averaged over consecutive windows of `window`
// steps (steps 1..W, W+1..2W, ...; the last window may be shorter) and every evaluation (itself a
// mean over eval_steps batches). Single steps are not checked: in bf16 the two trajectories part
// by rounding within a few dozen steps, after which one step's loss can differ by 10% where one
// run hits a loss spike the other does not (measured: compare.cpp), while a wrong attention
// moves the average. The largest single-step difference is reported alongside.
struct CurveDifference {
  double max_rel = 0;     // the checked figure: windowed training means and evaluations
  int64_t step = -1;      // where: the window's last step, or the evaluation's step
  bool val = false;       // at an evaluation rather than a training window
  double flash = NAN, naive = NAN;  // the two values there
  int64_t window = 1;
  double max_rel_step = 0;  // for information: the largest difference of one step's loss
  int64_t max_rel_step_at = -1;
  double max_rel_early = 0;  // for information: the largest over steps 1..kEarlySteps, before rounding
                             // differences compound (step 1 is the forward pass alone)
  static constexpr int64_t kEarlySteps = 5;
};
// A NaN on one side counts as an infinite difference.
CurveDifference max_relative_difference(const VariantResult& flash, const VariantResult& naive, int64_t window);
// The window for a run of `steps` steps: steps / 10, at least 1 and at most 100.
int64_t smoothing_window(int64_t steps);

// The largest max_rel the command accepts, by precision (compare.cpp records the measurements
// behind each value).
double default_tolerance(MixedPrecision p);

// step,flash_loss,naive_loss,flash_val_loss,naive_val_loss: one row per step either run logged,
// empty cells where a run logged nothing of that kind.
std::string losses_csv(const VariantResult& flash, const VariantResult& naive);

// FNV-1a over the master weights' bytes and the dropout generator's state: equal for two trainers
// that start from the same point.
class Trainer;
uint64_t start_fingerprint(Trainer& trainer);

}  // namespace ft
