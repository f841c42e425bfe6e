// The files of `flashtrain compare` under out_dir/compare/: report.md, losses.csv and the charts
// train_loss.svg, val_ppl.svg, throughput_memory.svg, attention_time.svg.
#pragma once

#include <string>

#include "core/device.h"
#include "train/config/config.h"
#include "train/report/compare.h"
#include "train/report/report_attention.h"

namespace ft {

struct CompareReport {
  TrainConfig cfg;     // as given (use_flash_attention aside)
  std::string device;  // device_name()
  bool on_cuda = false;
  uint64_t fingerprint = 0;  // start_fingerprint of both runs (equal, or the command stopped)
  VariantResult flash, naive;
  CurveDifference diff;
  double tolerance = 0;
  bool tolerance_given = false;  // --tolerance rather than default_tolerance
  AttentionTiming timing;
  bool probed = false;  // the max-T probe ran (CUDA only)
  MaxSeqLen flash_max, naive_max;
  int64_t max_t_cap = 0;
};

// The markdown text of report.md.
std::string compare_report_markdown(const CompareReport& r);
// Writes report.md, losses.csv and the SVGs into `dir` (which must exist).
void write_compare_report(const CompareReport& r, const std::string& dir);

}  // namespace ft
