#include "train/compare.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "train/json.h"

namespace ft {

std::vector<MetricsRecord> read_metrics(const std::string& path) {
  const std::string file = std::filesystem::is_directory(path) ? (std::filesystem::path(path) / "metrics.jsonl").string() : path;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(str(file, ": cannot open"));
  std::map<int64_t, MetricsRecord> by_step;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const Json j = Json::parse(line, str(file, ":", line_no));
    const Json* step = j.is_object() ? j.find("step") : nullptr;
    if (!step || !step->is_integer()) throw Error(str(file, ":", line_no, ": a record without an integer \"step\""));
    MetricsRecord& r = by_step[step->as_int64()];
    r.step = step->as_int64();
    const Json* loss = j.find("loss");
    const Json* val = j.find("val_loss");
    // null (a non-finite value) reads back as nan, so it shows in the comparison.
    if (loss) r.has_loss = true, r.loss = loss->is_number() ? loss->as_double() : NAN;
    if (val) r.has_val = true, r.val_loss = val->is_number() ? val->as_double() : NAN;
  }
  std::vector<MetricsRecord> out;
  for (auto& kv : by_step) out.push_back(kv.second);
  return out;
}

Comparison compare_metrics(const std::vector<MetricsRecord>& a, const std::vector<MetricsRecord>& b) {
  Comparison c;
  std::map<int64_t, const MetricsRecord*> in_b;
  for (const auto& r : b) in_b[r.step] = &r;
  auto track = [](double d, int64_t step, double& max, int64_t& at) {
    if (std::isnan(d)) d = INFINITY;  // a nan on one side is the largest difference there is
    if (d > max || at < 0) max = d, at = step;
  };
  for (const auto& ra : a) {
    const auto it = in_b.find(ra.step);
    if (it == in_b.end()) continue;
    const MetricsRecord& rb = *it->second;
    if (ra.has_loss && rb.has_loss) {
      c.rows.push_back({ra.step, false, ra.loss, rb.loss});
      track(std::fabs(ra.loss - rb.loss), ra.step, c.max_train_diff, c.max_train_step);
    }
    if (ra.has_val && rb.has_val) {
      c.rows.push_back({ra.step, true, ra.val_loss, rb.val_loss});
      track(std::fabs(ra.val_loss - rb.val_loss), ra.step, c.max_val_diff, c.max_val_step);
    }
  }
  return c;
}

std::string format_comparison(const Comparison& c, const std::string& name_a, const std::string& name_b) {
  std::string out = str("A = ", name_a, "\nB = ", name_b, "\n");
  char buf[160];
  std::snprintf(buf, sizeof buf, "%10s  %-8s %12s %12s %12s\n", "step", "metric", "A", "B", "A - B");
  out += buf;
  for (const auto& r : c.rows) {
    std::snprintf(buf, sizeof buf, "%10lld  %-8s %12.6f %12.6f %+12.3e\n", static_cast<long long>(r.step),
                  r.val ? "val_loss" : "loss", r.a, r.b, r.a - r.b);
    out += buf;
  }
  if (c.max_train_step >= 0) {
    std::snprintf(buf, sizeof buf, "max |A - B| loss %.3e at step %lld", c.max_train_diff, static_cast<long long>(c.max_train_step));
    out += buf;
  } else {
    out += "no common training steps";
  }
  if (c.max_val_step >= 0) {
    std::snprintf(buf, sizeof buf, "; val_loss %.3e at step %lld", c.max_val_diff, static_cast<long long>(c.max_val_step));
    out += buf;
  }
  return out + "\n";
}

}  // namespace ft
