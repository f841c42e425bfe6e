// gpt_config_from: the trainer's keys that shape the model reach nn::GPTConfig.
#include <gtest/gtest.h>

#include "train/model_config.h"

namespace ft {
namespace {

// `deterministic` (default true) becomes GPTConfig::deterministic, which CausalSelfAttention hands
// to the flash backward (ops::AttentionOptions::deterministic).
TEST(ModelConfig, DeterministicReachesTheModel) {
  TrainConfig c;
  EXPECT_TRUE(c.deterministic);
  EXPECT_TRUE(gpt_config_from(c).deterministic);
  c.deterministic = false;
  EXPECT_FALSE(gpt_config_from(c).deterministic);
}

// `document_mask` reaches the model with GPT-2's <|endoftext|> as the document separator.
TEST(ModelConfig, DocumentMaskReachesTheModel) {
  TrainConfig c;
  EXPECT_FALSE(gpt_config_from(c).document_mask);
  c.document_mask = true;
  EXPECT_TRUE(gpt_config_from(c).document_mask);
  EXPECT_EQ(gpt_config_from(c).eot_token, 50256);
}

// `layernorm_fp32` (default true) reaches the model's LayerNorms; false too.
TEST(ModelConfig, LayerNormFp32ReachesTheModel) {
  TrainConfig c;
  EXPECT_TRUE(gpt_config_from(c).layernorm_fp32);
  c.layernorm_fp32 = false;
  EXPECT_FALSE(gpt_config_from(c).layernorm_fp32);
}

// `head_chunk_mib` (default 512) becomes GPTConfig::head_chunk_mib, the training step's head's
// chunk budget; 0 (no chunks) too.
TEST(ModelConfig, HeadChunkBudgetReachesTheModel) {
  TrainConfig c;
  EXPECT_EQ(c.head_chunk_mib, 512);
  EXPECT_EQ(gpt_config_from(c).head_chunk_mib, 512);
  c.head_chunk_mib = 0;
  EXPECT_EQ(gpt_config_from(c).head_chunk_mib, 0);
}

}  // namespace
}  // namespace ft
