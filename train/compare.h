// `flashtrain compare RUN_A RUN_B`: two runs' metrics.jsonl side by side, step by step, with the
// largest loss difference -- the check behind "flash and naive attention give the same loss curve
// within bf16 noise" and "a resumed run reproduces the uninterrupted one".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ft {

struct MetricsRecord {
  int64_t step = 0;
  bool has_loss = false, has_val = false;
  double loss = 0, val_loss = 0;
};

// Records of a metrics.jsonl file, or of <dir>/metrics.jsonl when `path` is a directory. When a
// step appears twice (a run resumed without truncation), the later record wins.
std::vector<MetricsRecord> read_metrics(const std::string& path);

struct Comparison {
  struct Row {
    int64_t step;
    bool val;  // a val_loss row rather than a training loss row
    double a, b;
  };
  std::vector<Row> rows;  // steps both runs logged, ascending; training rows before val rows per step
  double max_train_diff = 0, max_val_diff = 0;  // max |a - b|
  int64_t max_train_step = -1, max_val_step = -1;
};

Comparison compare_metrics(const std::vector<MetricsRecord>& a, const std::vector<MetricsRecord>& b);
// The table and a summary line.
std::string format_comparison(const Comparison& c, const std::string& name_a, const std::string& name_b);

}  // namespace ft
