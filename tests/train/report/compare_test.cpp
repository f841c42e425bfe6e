#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "tests/train/train_test_util.h"
#include "tests/train/trainer_test_util.h"
#include "train/cli/cli.h"
#include "train/cli/command_options.h"
#include "train/config/config.h"
#include "train/report/compare.h"
#include "train/report/svg_chart.h"

namespace ft {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

VariantResult variant(const std::string& name, std::vector<double> losses, std::vector<MetricsRecord> metrics = {}) {
  VariantResult v;
  v.name = name;
  v.step_losses = std::move(losses);
  v.metrics = std::move(metrics);
  return v;
}

TEST(Compare, ReadMetricsKeepsLossValAndThroughput) {
  test::ScratchDir dir;
  test::write_text(dir / "m.jsonl", "{\"step\":1,\"loss\":3.0,\"lr\":1e-4,\"tokens_per_s\":100.5}\n"
                                    "{\"step\":2,\"val_loss\":2.6,\"val_ppl\":13.46}\n{\"step\":3,\"loss\":null}\n");
  const auto m = read_metrics(dir / "m.jsonl");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(m[0].has_loss && m[0].has_tps && !m[0].has_val);
  EXPECT_DOUBLE_EQ(m[0].tokens_per_s, 100.5);
  EXPECT_TRUE(m[1].has_val && !m[1].has_loss);
  EXPECT_TRUE(std::isnan(m[2].loss));
  EXPECT_EQ(median_tokens_per_s({{1, true, false, true, 1, 0, 10}, {2, true, false, true, 1, 0, 1000},
                                 {3, true, false, true, 1, 0, 30}}), 30);
}

TEST(Compare, LargestRelativeDifferenceCoversWindowsAndEvaluations) {
  MetricsRecord fv{4, false, true, false, 0, 2.2, 0}, nv{4, false, true, false, 0, 2.0, 0};
  const CurveDifference d = max_relative_difference(variant("flash", {4.0, 3.0, 2.5, 2.4}, {fv}),
                                                    variant("naive", {4.0, 3.03, 2.5, 2.4}, {nv}), 1);
  EXPECT_NEAR(d.max_rel, 0.1, 1e-12);  // the evaluation at step 4, not the 1% at step 2
  EXPECT_EQ(d.step, 4);
  EXPECT_TRUE(d.val);
  const CurveDifference t = max_relative_difference(variant("flash", {4.0, 3.0}), variant("naive", {4.0, 3.03}), 1);
  EXPECT_NEAR(t.max_rel, 0.03 / 3.03, 1e-12);
  EXPECT_EQ(t.step, 2);
  // Windows of 2 steps: (4 + 3.5) / 2 against (4 + 3.4) / 2 and then the last, shorter window (2 vs 2).
  const CurveDifference w =
      max_relative_difference(variant("flash", {4.0, 3.5, 2.0}), variant("naive", {4.0, 3.4, 2.0}), 2);
  EXPECT_NEAR(w.max_rel, 0.05 / 3.7, 1e-12);
  EXPECT_EQ(w.step, 2);
  EXPECT_NEAR(w.max_rel_step, 0.1 / 3.4, 1e-12);  // one step, reported but not checked
  EXPECT_EQ(w.max_rel_step_at, 2);
  EXPECT_NEAR(w.max_rel_early, 0.1 / 3.4, 1e-12);
  const CurveDifference n = max_relative_difference(variant("flash", {4.0, NAN}), variant("naive", {4.0, 3.0}), 5);
  EXPECT_TRUE(std::isinf(n.max_rel));  // a NaN on one side is the largest difference there is
  EXPECT_EQ(smoothing_window(100), 10);
  EXPECT_EQ(smoothing_window(10), 1);
  EXPECT_EQ(smoothing_window(100000), 100);
}

TEST(Compare, LossesCsvHasBothColumns) {
  const MetricsRecord f1{1, true, false, false, 3.5, 0, 0}, f2{2, false, true, false, 0, 3.25, 0};
  const MetricsRecord n1{1, true, false, false, 3.75, 0, 0};
  EXPECT_EQ(losses_csv(variant("flash", {}, {f1, f2}), variant("naive", {}, {n1})),
            "step,flash_loss,naive_loss,flash_val_loss,naive_val_loss\n1,3.5,3.75,,\n2,,,3.25,\n");
}

TEST(Compare, SvgLineChartHasAPolylinePerSeries) {
  SvgLineChart c;
  c.title = "a <b> & c";
  c.series = {{"flash", "#00f", {1, 2, 3}, {3, 2, 1}, false}, {"naive", "#f00", {1, 2, 3}, {3, 2.5, NAN}, true}};
  const std::string svg = svg_line_chart(c);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; c"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 2u);  // markers on the finite points of "naive" only
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  const std::vector<double> t = nice_ticks(0, 9.5);
  EXPECT_EQ(t, (std::vector<double>{0, 2, 4, 6, 8}));
}

TEST(Compare, UsageErrors) {
  std::istringstream in;
  std::ostringstream out, err;
  EXPECT_EQ(cli_main({"compare"}, in, out, err), 2);
  EXPECT_NE(err.str().find("usage: flashtrain compare CONFIG"), std::string::npos) << err.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(cli_main({"compare", "c.yaml", "--tolerance", "-1"}, in, out2, err2), 2);
  std::ostringstream out3, err3;
  EXPECT_EQ(cli_main({"compare", "/nonexistent/c.yaml"}, in, out3, err3), 1);
}

// The synthetic corpus and config of the trainer tests, with evaluations, as a YAML file.
struct CompareFixture {
  test::ScratchDir dir;
  TrainConfig cfg;
  std::string yaml;
  CompareFixture() {
    cfg = test::synthetic_config(dir.path());
    cfg.max_steps = 30;
    cfg.eval_interval = 10;
    cfg.dropout = 0.1;  // the two runs must draw the same masks
    yaml = dir / "c.yaml";
    test::write_text(yaml, config_to_yaml(cfg));
  }
  std::string out(const char* name) const { return cfg.out_dir + "/compare/" + name; }
};

TEST(Compare, CommandWritesTheReportAndTheCurvesAgree) {
  CompareFixture f;
  std::istringstream in;
  std::ostringstream out, err;
  const int rc = cli_main({"compare", f.yaml, "--set", "log_interval=5"}, in, out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  // Progress lines name their run.
  EXPECT_NE(out.str().find("[flash] step  5/30"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("[naive] step 30/30"), std::string::npos) << out.str();
  const std::string report = test::read_bytes(f.out("report.md"));
  EXPECT_NE(report.find("**agree**"), std::string::npos) << report;
  for (const char* s : {"### flash attention", "### naive attention", "final validation perplexity", "tokens/s",
                        "ms per step", "peak memory", "host: CPU allocator peak", "train_loss.svg", "val_ppl.svg",
                        "throughput_memory.svg", "attention_time.svg", "not probed on the CPU"})
    EXPECT_NE(report.find(s), std::string::npos) << s;
  for (const char* name : {"train_loss.svg", "val_ppl.svg", "attention_time.svg"}) {
    const std::string svg = test::read_bytes(f.out(name));
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << name;
    EXPECT_EQ(count(svg, "<polyline"), 2u) << name;
    EXPECT_NE(svg.find("data-name=\"flash\""), std::string::npos) << name;
    EXPECT_NE(svg.find("data-name=\"naive\""), std::string::npos) << name;
    EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n") << name;
  }
  const std::string bars = test::read_bytes(f.out("throughput_memory.svg"));
  EXPECT_EQ(bars.rfind("<svg", 0), 0u);
  EXPECT_EQ(count(bars, "class=\"bar\""), 4u);  // tokens/s and memory, two variants each

  // losses.csv: a row per logged step (1, 5, 10, ..., 30), both loss columns filled, and equal here
  // (fp32 on the CPU: flash and naive run the same reference, so the curves are identical).
  std::istringstream csv(test::read_bytes(f.out("losses.csv")));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "step,flash_loss,naive_loss,flash_val_loss,naive_val_loss");
  int rows = 0, val_rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    cells.resize(5);
    ASSERT_FALSE(cells[1].empty()) << line;
    EXPECT_EQ(cells[1], cells[2]) << line;
    if (!cells[3].empty()) {
      ++val_rows;
      EXPECT_EQ(cells[3], cells[4]) << line;
    }
  }
  EXPECT_EQ(rows, 7);
  EXPECT_EQ(val_rows, 3);
  EXPECT_TRUE(std::filesystem::exists(f.out("flash/metrics.jsonl")));
  EXPECT_TRUE(std::filesystem::exists(f.out("naive/metrics.jsonl")));
}

TEST(Compare, ExitCodeFlipsWhenTheRunsDiffer) {
  CompareFixture f;
  CompareOptions o;
  o.config_path = f.yaml;
  std::ostringstream out, err;
  // A 1% larger learning rate for the naive run: the same start, curves apart after step 1.
  o.naive_overrides = {"lr=0.0101"};
  EXPECT_EQ(run_compare(o, f.cfg, out, err), 1) << out.str();
  EXPECT_NE(err.str().find("flashtrain: error: compare: the flash and naive loss curves differ by"), std::string::npos)
      << err.str();
  EXPECT_NE(test::read_bytes(f.out("report.md")).find("**DIFFER**"), std::string::npos);
  // A generous --tolerance accepts the same difference.
  o.tolerance = 1.0;
  std::ostringstream out2, err2;
  EXPECT_EQ(run_compare(o, f.cfg, out2, err2), 0) << err2.str();
  // Runs that do not start from the same weights are not compared at all.
  o.naive_overrides = {"seed=8"};
  std::ostringstream out3, err3;
  EXPECT_THROW(run_compare(o, f.cfg, out3, err3), Error);
}

}  // namespace
}  // namespace ft
