// The attention-only part of the compare report: forward + backward time of ops::flash_* and
// ops::naive_* against T, and the longest sequence each attention lets the whole model train at
// batch 1 before the device runs out of memory.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "train/config/config.h"

namespace ft {

struct AttentionTiming {
  DType dtype = DType::F32;
  int64_t H = 0, D = 0;
  std::vector<int64_t> T;
  std::vector<double> flash_ms, naive_ms;  // median forward+backward time; NaN where it failed
  std::vector<std::string> failures;       // "naive T=32768: <message>" for each NaN
};

// Times fwd+bwd at batch 1 with cfg's H and D (causal, no dropout), `reps` timed calls after one
// warm-up, the device synchronised around each. On CUDA: bf16 (f16 for mixed_precision fp16);
// an allocation failure at one T is recorded and the larger T of that variant are skipped.
// On the CPU: f32, where flash and naive both run the float64 reference (ops/attention.h).
AttentionTiming time_attention(const TrainConfig& cfg, Device device, const std::vector<int64_t>& Ts, int reps,
                               std::ostream* progress);

struct MaxSeqLen {
  int64_t last_ok = 0;       // the longest T whose training step worked; 0 when none did
  int64_t first_failed = 0;  // the T that ran out of memory (or failed otherwise); 0: hit the cap
  std::string failure;       // its message
};

// Trains one optimizer step at batch 1 (micro-batches 1, no evaluation) at T = start, 2 start, ...
// up to `cap`, the model's max_seq_len = T, until a step throws (the caching allocator's
// out-of-memory ft::Error); the cache is emptied between attempts. Scratch files go to
// scratch_dir, which is removed after. Needs train_data with more than cap tokens.
MaxSeqLen longest_trainable_seq_len(const TrainConfig& cfg, bool flash, int64_t start, int64_t cap,
                                    const std::string& scratch_dir, std::ostream* progress);

}  // namespace ft
