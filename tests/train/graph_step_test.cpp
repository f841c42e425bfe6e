// compile_model: a micro-step replayed from a CUDA graph equals the eager micro-step bit for bit
// (train/graph_step.h), and the Generator's capture mode and lanes hand out the states the
// contract promises (core/random.h, known answers worked out by hand below).
//
// The GPU equalities train the same model twice from the same seed and data, compile_model off
// (the reference: the trainer's eager loop, which does not touch CapturedMicroStep) and on, and
// compare every step's loss, every master weight and the generator state exactly. Dropout on
// makes the check that the masks advance between replays: a replay that reused the capture's
// masks, or the warm-up's, would differ from eager at the second step. fp16 with a loss scale that
// doubles after every clean step checks that the scale is read from device memory.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/dropout_mask.h"
#include "core/random.h"
#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "tests/train/trainer_test_util.h"
#include "train/trainer.h"

namespace ft {
namespace {

// ---- Generator: capture mode and lanes (CPU, known answers) ----

TEST(GeneratorCapture, PlainNextHandsOutAndAdvances) {
  Generator g(5, 100);
  const PhiloxState a = g.next(10);
  EXPECT_EQ(a.seed, 5u);
  EXPECT_EQ(a.offset, 100u);
  EXPECT_EQ(a.offset_base, nullptr);
  EXPECT_EQ(g.next(3).offset, 110u);
  EXPECT_EQ(g.state().offset, 113u);
}

TEST(GeneratorCapture, LaneShiftsHandedOutOffsetsButNotTheState) {
  Generator g(5, 100);
  g.set_lane(3);
  const PhiloxState a = g.next(10);
  EXPECT_EQ(a.offset, 100u + (uint64_t{3} << 48));  // 844424930131968 + 100
  EXPECT_EQ(a.offset, 844424930132068ull);
  EXPECT_EQ(g.state().offset, 110u) << "state() is logical, lane-free";
  EXPECT_EQ(g.state().offset_base, nullptr);
  g.set_state(PhiloxState{5, 40});
  EXPECT_EQ(g.next(1).offset, 40u + (uint64_t{3} << 48));
  EXPECT_EQ(g.lane(), 3u);
  EXPECT_THROW(g.set_lane(uint64_t{1} << 16), Error);
}

TEST(GeneratorCapture, CaptureHandsOutRelativeOffsetsAndRewinds) {
  Generator g(9, 1000);
  g.set_lane(2);
  uint64_t word = 0;  // stands in for the device word
  g.begin_capture(&word);
  EXPECT_TRUE(g.capturing());
  const PhiloxState a = g.next(7), b = g.next(5);
  EXPECT_EQ(a.seed, 9u);
  EXPECT_EQ(a.offset, 0u + (uint64_t{2} << 48));
  EXPECT_EQ(b.offset, 7u + (uint64_t{2} << 48));
  EXPECT_EQ(a.offset_base, &word);
  EXPECT_EQ(b.offset_base, &word);
  EXPECT_THROW(g.begin_capture(&word), Error);
  EXPECT_THROW(g.set_state(PhiloxState{9, 0}), Error);
  EXPECT_EQ(g.end_capture(), 12u) << "what one captured pass consumes";
  EXPECT_FALSE(g.capturing());
  EXPECT_EQ(g.state().offset, 1000u) << "a capture runs nothing: the generator is rewound";
  EXPECT_EQ(g.next(1).offset_base, nullptr);
  EXPECT_EQ(g.end_capture(), 0u);
}

// A replay with the word set to the logical offset draws what the eager pass draws: the
// kernel-side fold (resolve_dropout_offset, host-callable) of each captured state equals the
// state an eager twin hands out, replay after replay.
TEST(GeneratorCapture, ResolvedReplayStatesEqualEagerStates) {
  Generator eager(3, 50), replayed(3, 50);
  eager.set_lane(1);
  replayed.set_lane(1);
  uint64_t word = 0;
  replayed.begin_capture(&word);
  const DropoutParams c1 = make_dropout_params(replayed.next(4), 0.1f);
  const DropoutParams c2 = make_dropout_params(replayed.next(6), 0.1f);
  const uint64_t per_pass = replayed.end_capture();
  ASSERT_EQ(per_pass, 10u);
  for (int pass = 0; pass < 3; ++pass) {
    word = replayed.state().offset;  // what CapturedMicroStep writes before a replay
    replayed.advance(per_pass);
    DropoutParams r1 = c1, r2 = c2;
    resolve_dropout_offset(r1);
    resolve_dropout_offset(r2);
    const DropoutParams e1 = make_dropout_params(eager.next(4), 0.1f);
    const DropoutParams e2 = make_dropout_params(eager.next(6), 0.1f);
    EXPECT_EQ(r1.offset, e1.offset) << "pass " << pass;
    EXPECT_EQ(r2.offset, e2.offset) << "pass " << pass;
    EXPECT_EQ(r1.offset, 50u + 10u * pass + (uint64_t{1} << 48));
    EXPECT_EQ(replayed.state().offset, eager.state().offset);
  }
}

// ---- compile_model on the CPU: ignored, said once ----

TEST(CompileModel, IgnoredOnTheCpuWithANote) {
  test::ScratchDir dir;
  TrainConfig c = test::synthetic_config(dir.path());
  c.compile_model = true;
  c.max_steps = 2;
  std::ostringstream log;
  TrainerOptions o;
  o.out = &log;
  Trainer t(c, o);
  t.run();
  EXPECT_NE(log.str().find("compile_model: true is ignored on the CPU"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("captured in a CUDA graph"), std::string::npos);
}

// ---- GPU: replayed == eager ----

struct Case {
  const char* name;
  bool flash;
  MixedPrecision precision;
  double dropout;
  int64_t accumulation;
};
// gtest prints a parameter in test listings (and ctest's test names): the name, not its bytes.
void PrintTo(const Case& k, std::ostream* os) { *os << k.name; }

struct RunResult {
  std::vector<double> losses;
  std::vector<float> initial, master;
  PhiloxState rng;
  std::string log;
};

TrainConfig gpu_config(const std::string& dir, const Case& k) {
  TrainConfig c = test::synthetic_config(dir);
  c.device = DeviceChoice::Cuda;
  c.d_model = 128;  // flash takes head dims 64 and 128 on CUDA
  c.n_heads = 2;
  c.d_ff = 256;
  c.max_seq_len = 64;
  c.block_size = 64;
  c.batch_size = 4;
  c.use_flash_attention = k.flash;
  c.deterministic = true;
  c.mixed_precision = k.precision;
  c.dropout = k.dropout;
  c.gradient_accumulation_steps = k.accumulation;
  c.max_steps = 4;
  c.loss_scale_init = 1024;
  c.loss_scale_growth_interval = 1;  // fp16: a new scale every step, so a baked-in one shows
  return c;
}

RunResult train(const TrainConfig& c, bool compile) {
  TrainConfig cc = c;
  cc.compile_model = compile;
  std::ostringstream log;
  TrainerOptions o;
  o.out = &log;
  Trainer t(cc, o);
  RunResult r;
  r.initial = t.arena().master().to_vector<float>();
  for (int64_t s = 0; s < cc.max_steps; ++s) r.losses.push_back(t.train_step());
  r.master = t.arena().master().to_vector<float>();
  r.rng = t.model().generator().state();
  r.log = log.str();
  return r;
}

class ReplayEqualsEager : public ::testing::TestWithParam<Case> {};

TEST_P(ReplayEqualsEager, LossesWeightsAndGeneratorBitIdentical) {
  FT_REQUIRE_CUDA();
  const Case k = GetParam();
  test::ScratchDir dir;
  const TrainConfig c = gpu_config(dir.path(), k);
  const RunResult eager = train(c, false);
  const RunResult graph = train(c, true);
  EXPECT_NE(graph.log.find("micro-step captured in a CUDA graph"), std::string::npos) << graph.log;
  EXPECT_EQ(eager.log.find("captured"), std::string::npos);
  ASSERT_EQ(graph.losses.size(), eager.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s) {
    EXPECT_TRUE(std::isfinite(eager.losses[s]));
    EXPECT_EQ(graph.losses[s], eager.losses[s]) << "step " << s + 1;
  }
  ASSERT_EQ(graph.master.size(), eager.master.size());
  size_t differ = 0;
  for (size_t i = 0; i < eager.master.size(); ++i) differ += graph.master[i] != eager.master[i];
  EXPECT_EQ(differ, 0u) << "of " << eager.master.size() << " master weights";
  EXPECT_EQ(graph.rng.seed, eager.rng.seed);
  EXPECT_EQ(graph.rng.offset, eager.rng.offset);
  // The run changed the weights (so equality is not vacuous) and dropout drew offsets.
  EXPECT_NE(eager.master, eager.initial);
  if (k.dropout > 0) {
    EXPECT_GT(eager.rng.offset, 0u);
  }
}

// Evaluation between replays stays eager and leaves the graph intact; a checkpoint written from a
// compiled run holds the exact generator state, so resuming (compiled again) continues the
// eager, uninterrupted run bit for bit.
TEST(CompileModel, EvalBetweenReplaysAndResumeMatchTheUninterruptedEagerRun) {
  FT_REQUIRE_CUDA();
  const Case k{"", false, MixedPrecision::BF16, 0.1, 2};
  auto config = [&](const std::string& dir, bool compile) {
    TrainConfig c = gpu_config(dir, k);
    c.max_steps = 6;
    c.eval_interval = 2;
    c.checkpoint_interval = 3;
    c.compile_model = compile;
    return c;
  };
  test::ScratchDir d_eager, d_graph;
  Trainer eager(config(d_eager.path(), false));
  const TrainSummary se = eager.run();
  ASSERT_EQ(se.losses.size(), 6u);

  const TrainConfig cg = config(d_graph.path(), true);
  std::ostringstream log;
  TrainerOptions first;
  first.stop_after = 3;
  first.out = &log;
  const TrainSummary s1 = Trainer(cg, first).run();
  TrainerOptions resume;
  resume.resume = true;
  resume.out = &log;
  Trainer graph(cg, resume);
  const TrainSummary s2 = graph.run();
  EXPECT_NE(log.str().find("micro-step captured in a CUDA graph"), std::string::npos) << log.str();
  ASSERT_EQ(s1.losses.size(), 3u);
  ASSERT_EQ(s2.losses.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(s1.losses[s], se.losses[s]) << "step " << s + 1;
    EXPECT_EQ(s2.losses[s], se.losses[s + 3]) << "step " << s + 4 << " (resumed)";
  }
  EXPECT_EQ(s2.val_loss, se.val_loss);
  EXPECT_EQ(graph.arena().master().to_vector<float>(), eager.arena().master().to_vector<float>());
  EXPECT_EQ(graph.model().generator().state().offset, eager.model().generator().state().offset);
}

INSTANTIATE_TEST_SUITE_P(
    CompileModel, ReplayEqualsEager,
    ::testing::Values(Case{"NaiveBf16Dropout", false, MixedPrecision::BF16, 0.1, 1},
                      Case{"NaiveBf16NoDropoutAccum3", false, MixedPrecision::BF16, 0.0, 3},
                      Case{"NaiveBf16DropoutAccum3", false, MixedPrecision::BF16, 0.1, 3},
                      Case{"NaiveFp16DropoutAccum2", false, MixedPrecision::FP16, 0.1, 2},
                      Case{"FlashBf16DropoutAccum2", true, MixedPrecision::BF16, 0.1, 2},
                      Case{"FlashBf16NoDropout", true, MixedPrecision::BF16, 0.0, 1},
                      Case{"FlashFp16Dropout", true, MixedPrecision::FP16, 0.1, 1}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ft
