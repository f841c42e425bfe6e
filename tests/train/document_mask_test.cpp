// document_mask in training: off is the model of before; on, a corpus without <|endoftext|> trains
// bit for bit as without the mask, and one with it changes the loss from the first step; on the GPU
// a compiled (CUDA-graph) micro-step with the mask replays the eager one bit for bit, so doc_start,
// made inside the captured step from the token buffer, follows each new batch.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "tests/train/trainer_test_util.h"
#include "train/trainer.h"

namespace ft {
namespace {

constexpr int32_t kEot = 50256;

// The synthetic corpus (tests/train/trainer_test_util.h), with an <|endoftext|> every `every`
// tokens (0: none), over GPT-2's vocabulary so the eot id is a token.
TrainConfig doc_config(const std::string& dir, int every) {
  TrainConfig c = test::synthetic_config(dir);
  for (const char* split : {"train", "val"}) {
    std::vector<int32_t> tok = test::synthetic_tokens(split[0] == 't' ? 8192 : 1024, split[0] == 't' ? 1 : 2);
    if (every > 0)
      for (size_t i = 3; i < tok.size(); i += static_cast<size_t>(every)) tok[i] = kEot;
    write_shard(dir + "/" + split + "_000000.bin", tok);
  }
  c.vocab_size = 50257;
  c.max_steps = 3;
  c.shuffle = false;
  return c;
}

struct Trained {
  std::vector<double> losses;  // of every step
  std::string log;
};
Trained train(TrainConfig c, bool document_mask) {
  c.document_mask = document_mask;
  std::ostringstream log;
  TrainerOptions o;
  o.out = &log;
  Trainer t(c, o);
  const TrainSummary s = t.run();
  return {s.losses, log.str()};
}
std::vector<double> losses(const TrainConfig& c, bool document_mask) { return train(c, document_mask).losses; }

TEST(DocumentMask, WithoutEndOfTextTheLossesAreThoseWithoutTheMask) {
  test::ScratchDir dir;
  const TrainConfig c = doc_config(dir.path(), 0);
  const Trained masked = train(c, true);
  EXPECT_EQ(masked.losses.size(), 3u);
  EXPECT_EQ(masked.losses, losses(c, false));
  EXPECT_NE(masked.log.find("attention flash (document mask), on "), std::string::npos) << masked.log;
}

TEST(DocumentMask, EndOfTextTokensChangeTheLoss) {
  test::ScratchDir dir;
  const TrainConfig c = doc_config(dir.path(), 5);  // about three documents per 16-token row
  const std::vector<double> masked = losses(c, true), plain = losses(c, false);
  EXPECT_NE(masked[0], plain[0]);  // the same weights at step 1: only the mask differs
  for (double l : masked) EXPECT_TRUE(std::isfinite(l));
}

TEST(DocumentMaskCuda, CompiledStepReplaysTheEagerOne) {
  FT_REQUIRE_CUDA();
  for (const bool flash : {true, false}) {
    test::ScratchDir dir;
    TrainConfig c = doc_config(dir.path(), 7);
    c.device = DeviceChoice::Cuda;
    c.d_model = 128;  // flash takes head dims 64 and 128
    c.n_heads = 2;
    c.d_ff = 256;
    c.max_seq_len = 64;
    c.block_size = 64;
    c.batch_size = 4;
    c.use_flash_attention = flash;
    c.mixed_precision = MixedPrecision::BF16;
    c.dropout = 0.1;
    c.gradient_accumulation_steps = 2;
    c.max_steps = 4;
    c.document_mask = true;
    TrainConfig compiled = c;
    compiled.compile_model = true;
    const std::vector<double> eager = losses(c, true), graph = losses(compiled, true);
    EXPECT_EQ(graph, eager) << "flash " << flash;
    EXPECT_NE(losses(c, false)[0], eager[0]) << "flash " << flash << ": the mask changes the first loss";
  }
}

}  // namespace
}  // namespace ft
