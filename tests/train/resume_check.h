// The resume check the trainer tests share: a run of 6 steps against 3 steps, a checkpoint, an
// interruption and --resume, compared step by step.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "train/config/json.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace ft::test {

// The rows of out_dir/metrics.jsonl with tokens_per_s dropped.
inline std::vector<std::string> metrics_without_timing(const std::string& out_dir) {
  std::vector<std::string> rows;
  std::istringstream in(read_bytes(out_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const Json parsed = Json::parse(line);
    Json row = Json::object();
    for (const auto& [k, v] : parsed.members())
      if (k != "tokens_per_s") row.set(k, v);
    rows.push_back(row.dump());
  }
  return rows;
}

// 6 steps with a checkpoint at 3, against 3 steps, an interruption, and --resume: dropout on, so
// the generator state and the loader position are exercised. Losses equal to the bit, or within
// `tolerance` (relative) where the device itself is not bit-reproducible.
inline void expect_exact_resume(TrainConfig c, const std::string& dir, double tolerance = 0) {
  c.max_steps = 6;
  c.checkpoint_interval = 3;
  c.dropout = 0.1;
  c.eval_interval = 2;  // evaluations in between must not disturb the random stream
  c.log_interval = 2;
  TrainConfig whole = c, parts = c;
  whole.out_dir = dir + "/whole";
  parts.out_dir = dir + "/parts";
  Trainer ta(whole);
  const TrainSummary a = ta.run();
  ASSERT_EQ(a.losses.size(), 6u);

  TrainerOptions first;
  first.stop_after = 3;
  std::vector<double> b;
  {
    Trainer tb(parts, first);
    b = tb.run().losses;
  }
  ASSERT_EQ(b.size(), 3u);
  TrainerOptions resume;
  resume.resume = true;
  Trainer tc(parts, resume);
  EXPECT_EQ(tc.step(), 3);
  const TrainSummary rest = tc.run();
  b.insert(b.end(), rest.losses.begin(), rest.losses.end());
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(ta.model().generator().state().offset, tc.model().generator().state().offset);
  if (tolerance == 0) {
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(a.losses[i], b[i]) << "step " << i + 1;
    EXPECT_EQ(ta.arena().master().to_doubles(), tc.arena().master().to_doubles());
    // metrics.jsonl reads as if the run had never stopped (timings aside).
    EXPECT_EQ(metrics_without_timing(whole.out_dir), metrics_without_timing(parts.out_dir));
  } else {
    for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(a.losses[i], b[i], tolerance * a.losses[i]) << "step " << i + 1;
  }
}

}  // namespace ft::test
