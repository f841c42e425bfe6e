// mixed_precision: fp32 on a GPU (naive attention; the flash kernels take bf16/f16 only): the
// first loss equals the CPU fp32 run's, the loss falls, resume is bit-exact, and a compile_model
// replay equals the eager run bit for bit. The same checks on the CPU keep the thresholds honest
// on machines without a GPU (the GPU tests skip there).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "train/trainer.h"
#include "resume_check.h"
#include "trainer_test_util.h"

namespace ft {
namespace {

// The synthetic corpus (trainer_test_util.h) on a model with GPT-2's head dim 64, fp32, naive.
TrainConfig fp32_config(const std::string& dir, DeviceChoice device) {
  TrainConfig c = test::synthetic_config(dir);
  c.device = device;
  c.mixed_precision = MixedPrecision::FP32;
  c.use_flash_attention = false;
  c.d_model = 128;
  c.n_heads = 2;
  c.d_ff = 256;
  c.max_steps = 30;
  return c;
}

double mean(const std::vector<double>& v, size_t begin, size_t end) {
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += v[i];
  return s / static_cast<double>(end - begin);
}

// 30 steps: finite, and the last five average well below the first five (ln 32 = 3.47 at init).
void expect_falls(const std::vector<double>& losses) {
  ASSERT_EQ(losses.size(), 30u);
  for (double l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_NEAR(losses.front(), std::log(static_cast<double>(test::kSynthVocab)), 0.2);
  EXPECT_LT(mean(losses, 25, 30), 0.75 * mean(losses, 0, 5)) << "first " << losses.front() << " last " << losses.back();
}

// ---- CPU: the same checks, so their thresholds are known to hold for fp32 ----

TEST(TrainerFp32, LossFallsOver30StepsOnTheCpu) {
  test::ScratchDir dir;
  Trainer t(fp32_config(dir.path(), DeviceChoice::Cpu));
  expect_falls(t.run().losses);
}

// ---- GPU: the lead's H100/H200 run checks these ----

TEST(TrainerFp32Cuda, RunsOnTheGpuWithNaiveAttention) {
  FT_REQUIRE_CUDA();
  test::ScratchDir dir;
  TrainConfig c = fp32_config(dir.path(), DeviceChoice::Auto);  // auto takes the GPU for fp32 + naive
  c.max_steps = 1;
  std::ostringstream log;
  TrainerOptions o;
  o.out = &log;
  Trainer t(c, o);
  EXPECT_TRUE(t.arena().master().is_cuda());
  t.run();
  EXPECT_NE(log.str().find("fp32, attention naive, on "), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find(", on cpu"), std::string::npos) << log.str();
}

TEST(TrainerFp32Cuda, FirstLossEqualsTheCpuRunsAndLossFalls) {
  FT_REQUIRE_CUDA();
  test::ScratchDir gdir, cdir;
  const std::vector<double> gpu = Trainer(fp32_config(gdir.path(), DeviceChoice::Cuda)).run().losses;
  TrainConfig c = fp32_config(cdir.path(), DeviceChoice::Cpu);
  c.max_steps = 1;
  const std::vector<double> cpu = Trainer(c).run().losses;
  ASSERT_EQ(cpu.size(), 1u);
  ASSERT_FALSE(gpu.empty());
  // Same init (built on the CPU from the seed, then moved), same batch, no dropout, no update yet:
  // only summation order differs (cuBLAS vs Eigen, f32 vs the CPU attention's float64), so f32
  // rounding -- about 1e-6 -- and nothing like bf16's 1e-2 or TF32's 1e-3.
  EXPECT_NEAR(gpu.front(), cpu.front(), 1e-5 * cpu.front());
  expect_falls(gpu);
}

TEST(TrainerFp32Cuda, ResumeIsBitExact) {
  FT_REQUIRE_CUDA();
  test::ScratchDir dir;
  test::expect_exact_resume(fp32_config(dir.path(), DeviceChoice::Cuda), dir.path());
}

// compile_model: the first micro-step runs eagerly, the rest replay a CUDA graph; losses, weights
// and the generator equal the eager run's bit for bit (dropout on, 2 micro-batches a step).
TEST(TrainerFp32Cuda, CompiledReplayEqualsEager) {
  FT_REQUIRE_CUDA();
  test::ScratchDir dir;
  TrainConfig c = fp32_config(dir.path(), DeviceChoice::Cuda);
  c.dropout = 0.1;
  c.gradient_accumulation_steps = 2;
  c.max_steps = 4;
  struct Result {
    std::vector<double> losses;
    std::vector<double> master;
    uint64_t offset = 0;
    std::string log;
  };
  auto train = [&](bool compile) {
    TrainConfig cc = c;
    cc.compile_model = compile;
    cc.out_dir = dir.path() + (compile ? "/graph" : "/eager");
    std::ostringstream log;
    TrainerOptions o;
    o.out = &log;
    Trainer t(cc, o);
    Result r;
    for (int64_t s = 0; s < cc.max_steps; ++s) r.losses.push_back(t.train_step());
    r.master = t.arena().master().to_doubles();
    r.offset = t.model().generator().state().offset;
    r.log = log.str();
    return r;
  };
  const Result eager = train(false), graph = train(true);
  EXPECT_NE(graph.log.find("micro-step captured in a CUDA graph"), std::string::npos) << graph.log;
  ASSERT_EQ(graph.losses.size(), eager.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) {
    EXPECT_TRUE(std::isfinite(eager.losses[s]));
    EXPECT_EQ(graph.losses[s], eager.losses[s]) << "step " << s + 1;
  }
  EXPECT_EQ(graph.master, eager.master);
  EXPECT_EQ(graph.offset, eager.offset);
  EXPECT_GT(eager.offset, 0u);
}

}  // namespace
}  // namespace ft
