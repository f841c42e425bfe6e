#include <gtest/gtest.h>

#include <cmath>

#include "train/metrics.h"
#include "train_test_util.h"

namespace ft {
namespace {

TEST(Metrics, WritesOneJsonObjectPerLine) {
  test::ScratchDir dir;
  const std::string path = dir / "run/metrics.jsonl";  // the directory is created
  MetricsLog log(path);
  log.log_train(1, 2.5, 1e-3, 1000);
  log.log_eval(2, 1.0);
  log.log_train(3, NAN, 1e-3, INFINITY);
  EXPECT_EQ(test::read_bytes(path),
            "{\"step\":1,\"loss\":2.5,\"lr\":0.001,\"tokens_per_s\":1000.0}\n"
            "{\"step\":2,\"val_loss\":1.0,\"val_ppl\":2.718281828459045}\n"
            "{\"step\":3,\"loss\":null,\"lr\":0.001,\"tokens_per_s\":null}\n");
}

TEST(Metrics, ResumeDropsLinesAfterTheCheckpointAndTornLines) {
  test::ScratchDir dir;
  const std::string path = dir / "metrics.jsonl";
  test::write_text(path,
                   "{\"step\":10,\"loss\":3}\n{\"step\":20,\"loss\":2}\n{\"step\":20,\"val_loss\":2.1,\"val_ppl\":8.2}\n"
                   "{\"step\":30,\"loss\":1.5}\n{\"step\":40,\"lo");
  MetricsLog log(path, 20);
  log.log_train(21, 1.9, 0.5, 10);
  EXPECT_EQ(test::read_bytes(path),
            "{\"step\":10,\"loss\":3}\n{\"step\":20,\"loss\":2}\n{\"step\":20,\"val_loss\":2.1,\"val_ppl\":8.2}\n"
            "{\"step\":21,\"loss\":1.9,\"lr\":0.5,\"tokens_per_s\":10.0}\n");
}

TEST(Metrics, ProgressLine) {
  Progress p;
  p.step = 120;
  p.total_steps = 5000;
  p.loss = 3.21449;
  p.lr = 1.2e-4;
  p.tokens_per_s = 45210;
  p.mfu = 0.381;
  p.eta_s = 3725;
  EXPECT_EQ(format_progress(p), "step  120/5000 | loss 3.2145 | lr 1.20e-04 | 45.2k tok/s | MFU 38.1% | ETA 1h02m");
  p.mfu = -1;  // unknown (CPU): left out
  p.eta_s = -1;
  p.step = 5000;
  p.tokens_per_s = 950;
  EXPECT_EQ(format_progress(p), "step 5000/5000 | loss 3.2145 | lr 1.20e-04 | 950 tok/s");
}

TEST(Metrics, Formatters) {
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(75), "1m15s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(format_duration(90061), "1d01h");
  EXPECT_EQ(format_duration(NAN), "?");
  EXPECT_EQ(format_rate(45210), "45.2k");
  EXPECT_EQ(format_rate(1.25e6), "1.25M");
  EXPECT_EQ(eta_seconds(10, 110, 20.0), 200.0);  // 2 s per step, 100 to go
  EXPECT_EQ(eta_seconds(0, 110, 20.0), -1);
  EXPECT_EQ(eta_seconds(110, 110, 20.0), 0);
  // GPT-2 small at T = 1024: 6 * 124M + 6 * 12 * 768 * 1024.
  EXPECT_EQ(flops_per_token(124'000'000, 12, 768, 1024), 744e6 + 56'623'104.0);
}

TEST(Metrics, PeakFlopsByDeviceName) {
  EXPECT_EQ(peak_bf16_flops("NVIDIA H100 80GB HBM3"), 989.4e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA H200"), 989.4e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA H100 PCIe"), 756.0e12);
  EXPECT_EQ(peak_bf16_flops("NVIDIA A100-SXM4-80GB"), 312.0e12);
  EXPECT_EQ(peak_bf16_flops("cpu"), -1);
  EXPECT_EQ(peak_fp32_flops("NVIDIA H200"), 67.0e12);
  EXPECT_EQ(peak_fp32_flops("NVIDIA H100 PCIe"), 51.0e12);
  EXPECT_EQ(peak_fp32_flops("cpu"), -1);
}

}  // namespace
}  // namespace ft
