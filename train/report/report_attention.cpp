#include "train/report/report_attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <ostream>

#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention.h"
#include "train/device_choice.h"
#include "train/trainer.h"

namespace ft {

namespace {

// Deterministic values in [-1, 1): attention times do not depend on the data, only the shapes.
Tensor pseudo_random(const Shape& shape, DType dtype, Device device, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    f = static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2 - 1);
  }
  return Tensor::from_floats(v, shape, dtype).to(device);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? NAN : v[v.size() / 2];
}

// One forward + backward; the caller synchronises.
void fwd_bwd(bool flash, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
             const ops::AttentionOptions& opts, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  if (flash) {
    const ops::AttentionForward f = ops::flash_attention_forward(q, k, v, opts);
    ops::flash_attention_backward(q, k, v, f.out, f.lse, dout, opts, dq, dk, dv);
  } else {
    const ops::AttentionForward f = ops::naive_attention_forward(q, k, v, opts);
    ops::naive_attention_backward(q, k, v, f, dout, opts, dq, dk, dv);
  }
}

}  // namespace

AttentionTiming time_attention(const TrainConfig& cfg, Device device, const std::vector<int64_t>& Ts, int reps,
                               std::ostream* progress) {
  AttentionTiming r;
  r.dtype = device.is_cuda() ? (cfg.mixed_precision == MixedPrecision::FP16 ? DType::F16 : DType::BF16) : DType::F32;
  r.H = cfg.n_heads;
  r.D = cfg.head_dim();
  ops::AttentionOptions opts;  // causal, no dropout
  bool flash_failed = false, naive_failed = false;
  for (int64_t T : Ts) {
    r.T.push_back(T);
    for (int f = 1; f >= 0; --f) {
      const bool flash = f == 1;
      bool& failed = flash ? flash_failed : naive_failed;
      double ms = NAN;
      if (!failed) {
        try {
          const Shape shape = {1, T, r.H, r.D};  // (B, T, H, D)
          const Tensor q = pseudo_random(shape, r.dtype, device, 1), k = pseudo_random(shape, r.dtype, device, 2),
                       v = pseudo_random(shape, r.dtype, device, 3), dout = pseudo_random(shape, r.dtype, device, 4);
          const Tensor dq = Tensor::zeros(shape, r.dtype, device), dk = Tensor::zeros(shape, r.dtype, device),
                       dv = Tensor::zeros(shape, r.dtype, device);
          fwd_bwd(flash, q, k, v, dout, opts, dq, dk, dv);  // warm-up
          synchronize(device);
          std::vector<double> times;
          for (int i = 0; i < reps; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            fwd_bwd(flash, q, k, v, dout, opts, dq, dk, dv);
            synchronize(device);
            times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
          }
          ms = median(times);
        } catch (const Error& e) {
          failed = true;
          r.failures.push_back(str(flash ? "flash" : "naive", " T=", T, ": ", e.what()));
        }
        if (device.is_cuda()) allocator_for(device).empty_cache();
      }
      (flash ? r.flash_ms : r.naive_ms).push_back(ms);
    }
    if (progress)
      *progress << "[attention] T=" << T << ": flash " << r.flash_ms.back() << " ms, naive " << r.naive_ms.back()
                << " ms (fwd+bwd, batch 1, " << dtype_name(r.dtype) << ")\n"
                << std::flush;
  }
  return r;
}

MaxSeqLen longest_trainable_seq_len(const TrainConfig& cfg, bool flash, int64_t start, int64_t cap,
                                    const std::string& scratch_dir, std::ostream* progress) {
  MaxSeqLen r;
  const Device device = resolve_device(cfg);
  for (int64_t T = start; T <= cap; T *= 2) {
    TrainConfig c = cfg;
    c.use_flash_attention = flash;
    c.max_seq_len = T;
    c.block_size = std::min(c.block_size, T);
    c.batch_size = 1;
    c.gradient_accumulation_steps = 1;
    c.max_steps = 1;
    c.eval_interval = 0;
    c.val_data.clear();
    c.checkpoint_interval = 0;
    c.out_dir = scratch_dir;
    try {
      Trainer t(c);
      t.train_step();
      synchronize(device);
      r.last_ok = T;
      if (progress) *progress << "[max T] " << (flash ? "flash" : "naive") << ": T=" << T << " trains\n" << std::flush;
    } catch (const Error& e) {
      r.first_failed = T;
      r.failure = e.what();
      if (progress)
        *progress << "[max T] " << (flash ? "flash" : "naive") << ": T=" << T << " fails: " << e.what() << "\n"
                  << std::flush;
    }
    if (device.is_cuda()) allocator_for(device).empty_cache();
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir, ec);
    if (r.first_failed) break;
  }
  return r;
}

}  // namespace ft
