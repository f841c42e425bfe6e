#include "train/report/report_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "train/report/svg_chart.h"

namespace ft {

namespace {

const char* const kFlashColor = "#1f77b4";
const char* const kNaiveColor = "#d62728";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string mib(int64_t bytes) { return fmt("%.1f MiB", static_cast<double>(bytes) / 1048576.0); }

std::string peak_label(const VariantResult& v) {
  if (v.peak_bytes < 0) return "n/a";
  return mib(v.peak_bytes) +
         (v.peak_on_device ? " (CUDA caching allocator peak)" : " (host: CPU allocator peak; no GPU)");
}

std::string variant_table(const VariantResult& v, const TrainConfig& cfg) {
  std::string o = str("### ", v.name, " attention\n\n| | ", v.name, " |\n|---|---|\n");
  o += str("| final train loss (step ", v.step_losses.size(), ") | ", fmt("%.4f", v.final_loss), " |\n");
  if (std::isfinite(v.val_loss)) {
    o += str("| final validation loss | ", fmt("%.4f", v.val_loss), " |\n");
    o += str("| final validation perplexity | ", fmt("%.2f", std::exp(v.val_loss)), " |\n");
  } else {
    o += "| final validation loss / perplexity | n/a (no evaluation: eval_interval 0 or no val_data) |\n";
  }
  o += str("| tokens/s (median of logged intervals) | ", fmt("%.0f", v.tokens_per_s), " |\n");
  o += str("| ms per step (", cfg.tokens_per_step(), " tokens) | ", fmt("%.1f", v.ms_per_step), " |\n");
  o += str("| wall time of the run (evaluations, checkpoints included) | ", fmt("%.1f s", v.seconds), " |\n");
  o += str("| peak memory | ", peak_label(v), " |\n\n");
  return o;
}

std::vector<double> steps_of(size_t n) {
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i + 1);
  return x;
}

SvgSeries val_ppl_series(const VariantResult& v, const char* color) {
  SvgSeries s{v.name, color, {}, {}, true};
  for (const auto& r : v.metrics) {
    if (!r.has_val) continue;
    s.x.push_back(static_cast<double>(r.step));
    s.y.push_back(std::exp(r.val_loss));
  }
  return s;
}

std::string max_t_text(const MaxSeqLen& m, int64_t cap) {
  if (m.last_ok == 0 && m.first_failed) return str("none (T=", m.first_failed, " already fails)");
  if (!m.first_failed) return str(m.last_ok, " (reached the cap ", cap, ")");
  return str(m.last_ok, " (T=", m.first_failed, " ",
             m.failure.find("out of memory") != std::string::npos ? "runs out of memory" : "fails", ")");
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(str(path, ": cannot write"));
  f << text;
  if (!f) throw Error(str(path, ": write failed"));
}

}  // namespace

std::string compare_report_markdown(const CompareReport& r) {
  const TrainConfig& c = r.cfg;
  std::string o = "# Flash vs naive attention: the same training run twice\n\n";
  o += str("GPT-2 ", c.n_layers, "L x ", c.d_model, "C x ", c.n_heads, "H (D = ", c.head_dim(),
           "), T = ", c.max_seq_len, ", ", c.batch_size, " x ", c.gradient_accumulation_steps, " sequences per step, ",
           r.flash.step_losses.size(), " steps, ", to_string(c.mixed_precision), ", dropout ", c.dropout, ", seed ",
           c.seed, ", on ", r.device, ". ");
  o += str("Both runs start from the same weights, data order and dropout generator state (fingerprint ", "`",
           r.fingerprint, "` for both); each writes its own run directory: ", "`flash/` and `naive/`.\n\n");

  o += "## Loss curves agree to rounding\n\n";
  const bool ok = r.diff.max_rel <= r.tolerance;
  const std::string where = r.diff.val ? str("the evaluation at step ", r.diff.step)
                                       : str("the training window of steps ",
                                             std::max<int64_t>(1, r.diff.step - r.diff.window + 1), "-", r.diff.step);
  o += str(
      "Largest relative difference |flash - naive| / |naive| of the loss curves (training loss averaged over "
      "windows of ",
      r.diff.window, " steps, and every validation loss): **", fmt("%.3e", r.diff.max_rel), "** at ", where, " (flash ",
      fmt("%.6f", r.diff.flash), ", naive ", fmt("%.6f", r.diff.naive), "). Tolerance ", fmt("%.1e", r.tolerance),
      r.tolerance_given ? " (--tolerance)" : str(" (the default for ", to_string(c.mixed_precision), ")"), ": **",
      ok ? "agree" : "DIFFER",
      "**.\n\nNot checked, for information: the largest difference of a single step's "
      "loss is ",
      fmt("%.3e", r.diff.max_rel_step), " at step ", r.diff.max_rel_step_at,
      " (once rounding "
      "differences have parted the two trajectories, one run can hit a loss spike the other does not); over "
      "steps 1-",
      CurveDifference::kEarlySteps, ", before they compound, it is ", fmt("%.3e", r.diff.max_rel_early),
      " (step 1 is the same batch through the same weights: the forward pass alone).\n\n");
  o += "The masks are identical and attention is exact, so the two runs differ only by floating-point rounding "
       "(flash accumulates dQ with atomics on CUDA, so it is reproducible to rounding only).";
  if (!r.on_cuda && c.mixed_precision == MixedPrecision::FP32)
    o += " On the CPU in fp32, flash and naive both run the float64 reference, so the curves should be identical.";
  o += "\n\n";

  o += "## Per variant\n\n" + variant_table(r.flash, c) + variant_table(r.naive, c);
  o += "![training loss](train_loss.svg)\n\n![validation perplexity](val_ppl.svg)\n\n"
       "![tokens/s and peak memory](throughput_memory.svg)\n\n";

  o += "## Attention alone\n\n";
  o += str("Forward + backward of the attention op at batch 1, H = ", r.timing.H, ", D = ", r.timing.D, ", causal, ",
           dtype_name(r.timing.dtype), ", median of timed calls.");
  if (!r.on_cuda)
    o += " On the CPU flash and naive are the same float64 reference, so this only shows the harness works.";
  o += "\n\n| T | flash ms | naive ms | naive / flash |\n|---|---|---|---|\n";
  for (size_t i = 0; i < r.timing.T.size(); ++i) {
    const double f = r.timing.flash_ms[i], n = r.timing.naive_ms[i];
    o += str("| ", r.timing.T[i], " | ", std::isfinite(f) ? fmt("%.3f", f) : "fails", " | ",
             std::isfinite(n) ? fmt("%.3f", n) : "fails", " | ",
             std::isfinite(f) && std::isfinite(n) && f > 0 ? fmt("%.2f", n / f) : "", " |\n");
  }
  for (const auto& f : r.timing.failures) o += str("\n- ", f);
  o += "\n\n";
  if (r.probed) {
    o +=
        str("Longest T the whole model trains at batch 1 (one optimizer step, T doubled from the config's until "
            "the caching allocator runs out of memory, cap ",
            r.max_t_cap, "): flash **", max_t_text(r.flash_max, r.max_t_cap), "**, naive **",
            max_t_text(r.naive_max, r.max_t_cap), "**.\n\n");
  } else {
    o += "Longest trainable T: not probed on the CPU (host memory would swap long before it ran out).\n\n";
  }
  o += "![attention time against T](attention_time.svg)\n\n";
  o += "Raw numbers: `losses.csv` (one row per logged step), `flash/metrics.jsonl`, `naive/metrics.jsonl`.\n";
  return o;
}

void write_compare_report(const CompareReport& r, const std::string& dir) {
  const auto path = [&](const char* name) { return (std::filesystem::path(dir) / name).string(); };
  write_file(path("report.md"), compare_report_markdown(r));
  write_file(path("losses.csv"), losses_csv(r.flash, r.naive));

  SvgLineChart loss;
  loss.title = "Training loss";
  loss.x_label = "step";
  loss.y_label = "loss";
  loss.series = {{"flash", kFlashColor, steps_of(r.flash.step_losses.size()), r.flash.step_losses, false},
                 {"naive", kNaiveColor, steps_of(r.naive.step_losses.size()), r.naive.step_losses, false}};
  loss.notes = {str("largest relative difference ", fmt("%.2e", r.diff.max_rel), " (", r.diff.window,
                    "-step means and validation; tolerance ", fmt("%.1e", r.tolerance), ")"),
                str("one step at most ", fmt("%.2e", r.diff.max_rel_step), "; naive dashed over flash")};
  write_file(path("train_loss.svg"), svg_line_chart(loss));

  SvgLineChart ppl;
  ppl.title = "Validation perplexity";
  ppl.x_label = "step";
  ppl.y_label = "perplexity";
  ppl.series = {val_ppl_series(r.flash, kFlashColor), val_ppl_series(r.naive, kNaiveColor)};
  if (ppl.series[0].x.empty()) ppl.notes = {"no evaluations in this run (eval_interval 0 or no val_data)"};
  write_file(path("val_ppl.svg"), svg_line_chart(ppl));

  const bool device = r.flash.peak_on_device;
  SvgBarPanel tps{"Throughput",
                  "tokens/s",
                  {"flash", "naive"},
                  {r.flash.tokens_per_s, r.naive.tokens_per_s},
                  {kFlashColor, kNaiveColor},
                  {}};
  SvgBarPanel mem{device ? "Peak device memory" : "Peak host memory (CPU allocator)",
                  "MiB",
                  {"flash", "naive"},
                  {r.flash.peak_bytes / 1048576.0, r.naive.peak_bytes / 1048576.0},
                  {kFlashColor, kNaiveColor},
                  {mib(r.flash.peak_bytes), mib(r.naive.peak_bytes)}};
  write_file(path("throughput_memory.svg"), svg_bar_panels({tps, mem}, str("Training on ", r.device)));

  SvgLineChart att;
  att.title = str("Attention forward + backward, batch 1, H=", r.timing.H, ", D=", r.timing.D, ", ",
                  dtype_name(r.timing.dtype));
  att.x_label = "sequence length T";
  att.y_label = "time (ms)";
  att.log_x = att.log_y = true;
  std::vector<double> ts(r.timing.T.begin(), r.timing.T.end());
  att.series = {{"flash", kFlashColor, ts, r.timing.flash_ms, true},
                {"naive", kNaiveColor, ts, r.timing.naive_ms, true}};
  if (r.probed) {
    att.notes = {str("longest T trained at batch 1: flash ", max_t_text(r.flash_max, r.max_t_cap)),
                 str("                               naive ", max_t_text(r.naive_max, r.max_t_cap))};
  } else {
    att.notes = {"CPU: flash and naive are the same float64 reference here; longest trainable T not probed"};
  }
  write_file(path("attention_time.svg"), svg_line_chart(att));
}

}  // namespace ft
