// Run metrics: out_dir/metrics.jsonl (one JSON object per line, for plots and tools) and the
// human progress line (pure functions, so the format is tested to the character).
//
//   {"step": 120, "loss": 3.2145, "lr": 0.00012, "tokens_per_s": 45210.5}    a training step
//   {"step": 500, "val_loss": 2.91, "val_ppl": 18.36}                        an evaluation
//
// Non-finite values are written as null (JSON has no inf or nan).
#pragma once

#include <cstdint>
#include <string>

#include "train/config/json.h"

namespace ft {

class MetricsLog {
 public:
  // Opens <path> for appending (creating it and its directory). With resume_step >= 0, lines of a
  // later step (written by the interrupted run after its last checkpoint) are dropped first, so a
  // resumed run's file reads as if the run had never stopped.
  explicit MetricsLog(std::string path, int64_t resume_step = -1);

  void log_train(int64_t step, double loss, double lr, double tokens_per_s);
  void log_eval(int64_t step, double val_loss);  // val_ppl = exp(val_loss)
  // Any object with a "step" member, one line, flushed.
  void append(const Json& record);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Removes the records of <path> with "step" > step (a temporary file renamed into place).
// Unparseable lines (a torn last line from a crash) are dropped too.
void truncate_metrics_after(const std::string& path, int64_t step);

// FLOPs per trained token for the MFU figure: 6N + 6*L*C*T (issue 5's count: 6N for the matrix
// products of forward and backward, 6LCT for attention scores and values).
double flops_per_token(int64_t n_params, int64_t n_layers, int64_t d_model, int64_t seq_len);

// Dense bf16 tensor-core peak of a GPU from its CUDA device name (cudaDeviceProp::name), the
// denominator of MFU; -1 for a card not in the table (MFU is then left out of the progress line).
// Datasheet figures without sparsity: H100 SXM and H200 989 TFLOP/s, H100 NVL 835, H100 PCIe 756,
// A100 312.
double peak_bf16_flops(const std::string& device_name);
// The same for plain fp32 arithmetic (mixed_precision: fp32 runs its matrix products in full fp32,
// not TF32): H100 SXM and H200 67 TFLOP/s, H100 NVL 60, H100 PCIe 51, A100 19.5; -1 otherwise.
double peak_fp32_flops(const std::string& device_name);

struct Progress {
  int64_t step = 0;         // optimizer steps done
  int64_t total_steps = 0;  // of the run
  double loss = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double mfu = -1;          // fraction of peak; < 0 = unknown (e.g. on CPU)
  double eta_s = -1;        // seconds; < 0 = unknown
};

// "step  120/5000 | loss 3.2145 | lr 1.20e-04 | 45.2k tok/s | MFU 38.1% | ETA 1h02m"
// The step field is padded to the width of total_steps so successive lines align.
std::string format_progress(const Progress& p);
// 75 -> "1m15s", 3725 -> "1h02m", 90061 -> "1d01h", 42 -> "42s".
std::string format_duration(double seconds);
// 950 -> "950", 45210 -> "45.2k", 1.25e6 -> "1.25M".
std::string format_rate(double per_second);
// Remaining seconds at the average pace so far.
double eta_seconds(int64_t steps_done, int64_t total_steps, double elapsed_s);

}  // namespace ft
