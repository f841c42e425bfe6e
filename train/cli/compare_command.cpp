// `flashtrain compare`: the config trained twice, flash then naive attention, then the attention
// timing and the report (train/report/compare.h has what the comparison checks, and why).
#include <algorithm>
#include <filesystem>
#include <ostream>
#include <streambuf>

#include "core/allocator.h"
#include "core/error.h"
#include "train/cli/command_options.h"
#include "train/device_choice.h"
#include "train/report/compare.h"
#include "train/report/report_compare.h"
#include "train/trainer.h"

namespace ft {

namespace {

// Prefixes every line written through it, so the two runs' progress lines say which run they are.
class PrefixBuf : public std::streambuf {
 public:
  PrefixBuf(std::ostream& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

 protected:
  int overflow(int c) override {
    if (c == EOF) return 0;
    if (at_line_start_) out_ << prefix_;
    out_.put(static_cast<char>(c));
    at_line_start_ = c == '\n';
    return c;
  }
  int sync() override {
    out_.flush();
    return 0;
  }

 private:
  std::ostream& out_;
  std::string prefix_;
  bool at_line_start_ = true;
};

VariantResult run_variant(const TrainConfig& base, bool flash, const std::vector<std::string>& extra_overrides,
                          const std::string& dir, std::ostream& out, uint64_t* fingerprint,
                          const uint64_t* expected_fingerprint) {
  VariantResult r;
  r.name = flash ? "flash" : "naive";
  TrainConfig c = base;
  c.use_flash_attention = flash;
  for (const auto& o : extra_overrides) apply_override(c, o);
  validate_config(c);
  c.out_dir = (std::filesystem::path(dir) / r.name).string();
  std::filesystem::remove_all(c.out_dir);  // ours alone: a fresh run, no checkpoints of an earlier compare
  PrefixBuf buf(out, "[" + r.name + "] ");
  std::ostream prefixed(&buf);
  TrainerOptions to;
  to.out = &prefixed;
  const Device device = resolve_device(c);
  synchronize(device);
  allocator_for(device).reset_peak();
  {
    Trainer trainer(c, to);
    *fingerprint = start_fingerprint(trainer);
    if (expected_fingerprint && *fingerprint != *expected_fingerprint)
      throw Error(str("compare: the ", r.name, " run does not start from the same weights and dropout state as the "
                      "flash run (fingerprints ", *fingerprint, " and ", *expected_fingerprint,
                      "); their curves cannot be compared"));
    const TrainSummary s = trainer.run();
    synchronize(device);
    r.step_losses = s.losses;
    r.seconds = s.seconds;
    if (!s.losses.empty()) r.final_loss = s.losses.back();
    if (s.val_loss >= 0) r.val_loss = s.val_loss;
  }
  prefixed.flush();
  r.peak_bytes = static_cast<int64_t>(allocator_for(device).stats().peak_allocated_bytes);
  r.peak_on_device = device.is_cuda();
  r.metrics = read_metrics(c.out_dir);
  r.tokens_per_s = median_tokens_per_s(r.metrics);
  if (r.tokens_per_s > 0) r.ms_per_step = 1000.0 * static_cast<double>(c.tokens_per_step()) / r.tokens_per_s;
  return r;
}

}  // namespace

int run_compare(const CompareOptions& options, const TrainConfig& cfg, std::ostream& out, std::ostream& err) {
  const std::string dir = (std::filesystem::path(cfg.out_dir) / "compare").string();
  std::filesystem::create_directories(dir);
  CompareReport rep;
  rep.cfg = cfg;
  // Both runs on one device: the one the flash run can use (flash asks more of a GPU than naive,
  // e.g. fp32 on a GPU runs naive attention only), so device: auto cannot split them.
  TrainConfig pinned = cfg;
  if (pinned.device == DeviceChoice::Auto) {
    TrainConfig flash = cfg;
    flash.use_flash_attention = true;
    pinned.device = resolve_device(flash).is_cuda() ? DeviceChoice::Cuda : DeviceChoice::Cpu;
  }
  const Device device = resolve_device(pinned);
  rep.device = device_name(device);
  rep.on_cuda = device.is_cuda();

  out << "flashtrain compare: the same run twice, flash then naive attention, into " << dir << "/{flash,naive}\n"
      << std::flush;
  uint64_t fp_flash = 0, fp_naive = 0;
  rep.flash = run_variant(pinned, true, {}, dir, out, &fp_flash, nullptr);
  rep.naive = run_variant(pinned, false, options.naive_overrides, dir, out, &fp_naive, &fp_flash);
  rep.fingerprint = fp_flash;
  rep.diff = max_relative_difference(rep.flash, rep.naive,
                                     smoothing_window(static_cast<int64_t>(rep.flash.step_losses.size())));
  rep.tolerance_given = options.tolerance >= 0;
  rep.tolerance = rep.tolerance_given ? options.tolerance : default_tolerance(cfg.mixed_precision);

  // Attention alone: a T range that keeps the CPU quick (the float64 reference is O(T^2 D) per head).
  std::vector<int64_t> Ts;
  if (rep.on_cuda) {
    for (int64_t T = 128; T <= 16384; T *= 2) Ts.push_back(T);
  } else {
    for (int64_t T = 32; T <= 512; T *= 2) Ts.push_back(T);
  }
  out << "flashtrain compare: attention fwd+bwd time against T\n" << std::flush;
  rep.timing = time_attention(pinned, device, Ts, rep.on_cuda ? 10 : 3, &out);
  if (rep.on_cuda) {
    // Double T from the config's until a training step at batch 1 runs out of device memory.
    rep.probed = true;
    rep.max_t_cap = 65536;
    const int64_t start = std::min<int64_t>(std::max<int64_t>(cfg.max_seq_len, 128), rep.max_t_cap);
    out << "flashtrain compare: the longest T each trains at batch 1 (one step per T, up to " << rep.max_t_cap
        << ")\n" << std::flush;
    const std::string scratch = (std::filesystem::path(dir) / "max_t_probe").string();
    rep.flash_max = longest_trainable_seq_len(pinned, true, start, rep.max_t_cap, scratch, &out);
    rep.naive_max = longest_trainable_seq_len(pinned, false, start, rep.max_t_cap, scratch, &out);
  }

  write_compare_report(rep, dir);
  const bool ok = rep.diff.max_rel <= rep.tolerance;
  out << "flashtrain compare: largest relative loss difference " << rep.diff.max_rel << " at step " << rep.diff.step
      << (rep.diff.val ? " (validation)" : str(" (", rep.diff.window, "-step mean)")) << ", one step "
      << rep.diff.max_rel_step << ", tolerance " << rep.tolerance << ": " << (ok ? "agree" : "DIFFER")
      << "\nflashtrain compare: report in " << dir << "/report.md\n";
  if (!ok) {
    err << "flashtrain: error: compare: the flash and naive loss curves differ by " << rep.diff.max_rel
        << " (relative) at step " << rep.diff.step << ", more than the tolerance " << rep.tolerance << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ft
