#include "train/metrics.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint/file_util.h"

namespace ft {

namespace {

Json number(double v) { return std::isfinite(v) ? Json(v) : Json(); }

}  // namespace

void truncate_metrics_after(const std::string& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // nothing written yet
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      const Json j = Json::parse(line, path);
      const Json* s = j.is_object() ? j.find("step") : nullptr;
      if (s && s->is_integer() && s->as_int64() <= step) kept += line + "\n";
    } catch (const Error&) {
      // A line torn by a crash mid-write: drop it.
    }
  }
  write_file_atomic(path, kept);
}

MetricsLog::MetricsLog(std::string path, int64_t resume_step) : path_(std::move(path)) {
  const auto parent = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw Error(str(path_, ": cannot create directory ", parent.string(), ": ", ec.message()));
  if (resume_step >= 0) truncate_metrics_after(path_, resume_step);
  std::ofstream touch(path_, std::ios::app);
  if (!touch) throw Error(str(path_, ": cannot open for appending: ", errno_message()));
}

void MetricsLog::append(const Json& record) {
  FT_CHECK_ARG(record.is_object() && record.find("step"), "[metrics] a record needs a \"step\": ", record.dump());
  // Opened per record: lines are rare (every log_interval steps) and each is then on disk even if
  // the process dies right after.
  std::ofstream out(path_, std::ios::app | std::ios::binary);
  out << record.dump() << '\n';
  out.flush();
  if (!out) throw Error(str(path_, ": write failed: ", errno_message()));
}

void MetricsLog::log_train(int64_t step, double loss, double lr, double tokens_per_s) {
  append(Json::object({{"step", step}, {"loss", number(loss)}, {"lr", number(lr)}, {"tokens_per_s", number(tokens_per_s)}}));
}

void MetricsLog::log_eval(int64_t step, double val_loss) {
  append(Json::object({{"step", step}, {"val_loss", number(val_loss)}, {"val_ppl", number(std::exp(val_loss))}}));
}

double flops_per_token(int64_t n_params, int64_t n_layers, int64_t d_model, int64_t seq_len) {
  return 6.0 * static_cast<double>(n_params) +
         6.0 * static_cast<double>(n_layers) * static_cast<double>(d_model) * static_cast<double>(seq_len);
}

namespace {

// Dense datasheet figures, without sparsity: tensor-core bf16 and plain fp32 (metrics.h).
struct PeakFlops {
  double bf16 = -1, fp32 = -1;
};

PeakFlops peak_flops(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("H200") || has("GH200")) return {989.4e12, 67.0e12};
  if (has("H100")) {
    if (has("PCIe")) return {756.0e12, 51.0e12};
    if (has("NVL")) return {835.0e12, 60.0e12};
    return {989.4e12, 67.0e12};  // SXM ("NVIDIA H100 80GB HBM3")
  }
  if (has("A100")) return {312.0e12, 19.5e12};
  return {};
}

}  // namespace

double peak_bf16_flops(const std::string& name) { return peak_flops(name).bf16; }
double peak_fp32_flops(const std::string& name) { return peak_flops(name).fp32; }

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s % 3600 / 60));
  else std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400), static_cast<long long>(s % 86400 / 3600));
  return buf;
}

std::string format_rate(double v) {
  if (!std::isfinite(v) || v < 0) return "?";
  char buf[32];
  if (v < 1e3) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (v < 1e6) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  return buf;
}

double eta_seconds(int64_t steps_done, int64_t total_steps, double elapsed_s) {
  if (steps_done <= 0 || total_steps <= 0) return -1;
  if (steps_done >= total_steps) return 0;
  return elapsed_s / static_cast<double>(steps_done) * static_cast<double>(total_steps - steps_done);
}

std::string format_progress(const Progress& p) {
  const int width = static_cast<int>(std::to_string(p.total_steps).size());
  char buf[256];
  std::snprintf(buf, sizeof buf, "step %*lld/%lld | loss %.4f | lr %.2e | %s tok/s", width, static_cast<long long>(p.step),
                static_cast<long long>(p.total_steps), p.loss, p.lr, format_rate(p.tokens_per_s).c_str());
  std::string out = buf;
  if (p.mfu >= 0) {
    std::snprintf(buf, sizeof buf, " | MFU %.1f%%", 100.0 * p.mfu);
    out += buf;
  }
  if (p.eta_s >= 0) out += " | ETA " + format_duration(p.eta_s);
  return out;
}

}  // namespace ft
