#include <gtest/gtest.h>

#include "core/error.h"
#include "train/lr_schedule.h"

namespace ft {
namespace {

// lr 1e-3, floor 1e-4, warmup 10, 110 steps: the decay runs over steps [10, 110).
LrSchedule make(LrDecay decay) {
  LrSchedule s;
  s.lr = 1e-3;
  s.min_lr = 1e-4;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.decay = decay;
  return s;
}

TEST(LrSchedule, WarmupIsLinearFromTheFirstStep) {
  const LrSchedule s = make(LrDecay::Cosine);
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);  // 1e-3 * 1/10
  EXPECT_DOUBLE_EQ(s.at(4), 5e-4);  // 1e-3 * 5/10
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
}

TEST(LrSchedule, CosineDecayHandComputed) {
  const LrSchedule s = make(LrDecay::Cosine);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);                        // p = 0
  EXPECT_NEAR(s.at(35), 1e-4 + 9e-4 * 0.8535533905932737, 1e-15);  // p = 1/4: (1 + cos(pi/4)) / 2
  EXPECT_NEAR(s.at(60), 5.5e-4, 1e-15);                    // p = 1/2
  EXPECT_NEAR(s.at(85), 1e-4 + 9e-4 * 0.1464466094067262, 1e-15);  // p = 3/4
  EXPECT_DOUBLE_EQ(s.at(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(5000), 1e-4);
}

TEST(LrSchedule, LinearAndConstant) {
  const LrSchedule lin = make(LrDecay::Linear);
  EXPECT_NEAR(lin.at(35), 7.75e-4, 1e-15);  // 1e-4 + 9e-4 * 3/4
  EXPECT_NEAR(lin.at(60), 5.5e-4, 1e-15);
  EXPECT_NEAR(lin.at(109), 1e-4 + 9e-4 * 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(lin.at(110), 1e-4);
  const LrSchedule c = make(LrDecay::Constant);
  EXPECT_DOUBLE_EQ(c.at(4), 5e-4);  // warmup still applies
  EXPECT_DOUBLE_EQ(c.at(60), 1e-3);
  EXPECT_DOUBLE_EQ(c.at(500), 1e-3);
}

TEST(LrSchedule, NoWarmupAndRunsShorterThanWarmup) {
  LrSchedule s = make(LrDecay::Cosine);
  s.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(s.at(0), 1e-3);
  s.warmup_steps = 200;  // the run ends inside the warmup
  EXPECT_DOUBLE_EQ(s.at(109), 1e-3 * 110 / 200);
  EXPECT_THROW(s.at(-1), Error);
}

TEST(LrSchedule, FromConfigUsesMinLrRatio) {
  TrainConfig cfg;
  cfg.lr = 6e-4;
  cfg.min_lr_ratio = 0.1;
  cfg.warmup_steps = 100;
  cfg.lr_decay = LrDecay::Linear;
  const LrSchedule s = LrSchedule::from_config(cfg, 1000);
  EXPECT_DOUBLE_EQ(s.min_lr, 6e-5);
  EXPECT_EQ(s.total_steps, 1000);
  EXPECT_EQ(s.decay, LrDecay::Linear);
  EXPECT_DOUBLE_EQ(s.at(999 + 1), 6e-5);
  EXPECT_THROW(LrSchedule::from_config(cfg, 0), Error);
}

}  // namespace
}  // namespace ft
