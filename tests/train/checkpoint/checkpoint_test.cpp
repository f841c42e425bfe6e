#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "tests/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/file_util.h"
#include "train/checkpoint/hf_gpt2_names.h"
#include "train/checkpoint/safetensors.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

TrainConfig tiny_config() {
  TrainConfig c;
  c.vocab_size = 11;
  c.max_seq_len = 8;
  c.block_size = 8;
  c.d_model = 4;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_ff = 16;
  return c;
}

// Parameters of the tiny config with distinct pseudo-random values.
std::vector<NamedTensor> tiny_model(const TrainConfig& c, float salt) {
  const Gpt2Dims d = Gpt2Dims::from_config(c);
  std::vector<NamedTensor> out;
  uint32_t x = 12345;
  for (const auto& name : gpt2_param_names(d.n_layer)) {
    const Shape s = gpt2_param_shape(name, d);  // hf_gpt2_names_test checks it independently
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (auto& e : v) {
      x = x * 1664525u + 1013904223u;
      e = static_cast<float>(x >> 8) / 16777216.f - 0.5f + salt;
    }
    out.push_back({name, Tensor::from_vector(v, s)});
  }
  return out;
}

Checkpoint make_checkpoint(int64_t step) {
  Checkpoint ck;
  ck.config = tiny_config();
  ck.model = tiny_model(ck.config, static_cast<float>(step));
  ck.optimizer = {{"m", Tensor::from_vector<float>({1, 2, 3}, {3})},
                  {"v", Tensor::from_vector<float>({4, 5, 6}, {3})},
                  {"master", Tensor::from_floats({0.5f}, {1}, DType::F32)}};
  ck.state.step = step;
  ck.state.rng = PhiloxState{1337, 18446744073709551000ull};  // beyond int64 and 2^53
  ck.state.data_position = Json("epoch=1 step=7 fingerprint=abc");
  ck.state.loss_scaler = Json::object({{"scale", 32768.0}, {"good_steps", 12}});
  ck.state.extra.set("tokens_seen", 123456789012);
  return ck;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(Checkpoint, RoundTripsEverything) {
  test::ScratchDir out;
  const Checkpoint ck = make_checkpoint(40);
  const std::string dir = save_checkpoint(out.path(), ck);
  EXPECT_EQ(dir, out / "ckpt-40");
  for (const char* f : {"model.safetensors", "config.json", "optimizer.safetensors", "state.json"})
    EXPECT_TRUE(fs::is_regular_file(dir + "/" + f)) << f;
  EXPECT_FALSE(fs::exists(out / "ckpt-40.tmp"));
  EXPECT_TRUE(is_complete_checkpoint(dir));

  const Checkpoint back = load_checkpoint(dir);
  EXPECT_EQ(back.config, ck.config);
  ASSERT_EQ(back.model.size(), ck.model.size());
  for (size_t i = 0; i < ck.model.size(); ++i) {
    EXPECT_EQ(back.model[i].name, ck.model[i].name);
    EXPECT_TRUE(same_bits(back.model[i].tensor, ck.model[i].tensor)) << ck.model[i].name;
  }
  ASSERT_EQ(back.optimizer.size(), 3u);
  for (const auto& t : ck.optimizer) {
    bool found = false;
    for (const auto& u : back.optimizer) {
      if (u.name != t.name) continue;
      found = true;
      EXPECT_TRUE(same_bits(u.tensor, t.tensor)) << t.name;
    }
    EXPECT_TRUE(found) << t.name;
  }
  EXPECT_EQ(back.state.step, 40);
  EXPECT_EQ(back.state.rng.seed, 1337u);
  EXPECT_EQ(back.state.rng.offset, 18446744073709551000ull);
  EXPECT_EQ(back.state.data_position, ck.state.data_position);
  EXPECT_EQ(back.state.loss_scaler, ck.state.loss_scaler);
  EXPECT_EQ(back.state.extra.at("tokens_seen").as_int64(), 123456789012);
}

TEST(Checkpoint, ModelFileIsHuggingFaceGpt2) {
  test::ScratchDir out;
  const Checkpoint ck = make_checkpoint(1);
  const std::string dir = save_checkpoint(out.path(), ck);
  const SafetensorsFile model = load_safetensors(dir + "/model.safetensors");
  ASSERT_NE(model.find_metadata("format"), nullptr);
  EXPECT_EQ(*model.find_metadata("format"), "pt");  // from_pretrained refuses files without it
  EXPECT_EQ(model.find("lm_head.weight"), nullptr);
  const Tensor& c_fc = model.at("transformer.h.1.mlp.c_fc.weight");
  EXPECT_EQ(c_fc.shape(), (Shape{4, 16}));  // Conv1D (in, out)
  const Tensor& fc = ck.model[2 + 12 + 8].tensor;  // h.1.mlp.c_fc.weight (16, 4)
  ASSERT_EQ(ck.model[2 + 12 + 8].name, "h.1.mlp.c_fc.weight");
  EXPECT_EQ(c_fc.to_vector<float>()[1 * 16 + 5], fc.to_vector<float>()[5 * 4 + 1]);
  const Json config = Json::parse(read_file_contents(dir + "/config.json"));
  EXPECT_EQ(config.at("model_type").as_string(), "gpt2");
  EXPECT_EQ(config.at("n_embd").as_int64(), 4);
  EXPECT_EQ(config.at("n_positions").as_int64(), 8);

  // --init-from reads any such directory; dimensions must agree.
  EXPECT_EQ(load_hf_gpt2_weights(dir, Gpt2Dims::from_config(ck.config)).size(), ck.model.size());
  Gpt2Dims other = Gpt2Dims::from_config(ck.config);
  other.n_layer = 3;
  EXPECT_THROW(load_hf_gpt2_weights(dir, other), Error);
}

// Grouped-query attention (n_kv_heads < n_heads) is not GPT-2: the checkpoint keeps the layout
// with a c_attn of (H + 2 H_kv) D rows, under model_type flashtrain_gpt2_gqa so Hugging Face
// refuses it by name, and flashtrain reads it back; a GPT-2 model cannot be read as one.
TEST(Checkpoint, GroupedQueryAttentionModelsRoundTripButAreNotGpt2) {
  test::ScratchDir out;
  Checkpoint ck = make_checkpoint(2);
  ck.config.d_model = 8;  // H = 4 heads of D = 2
  ck.config.n_heads = 4;
  ck.config.n_kv_heads = 2;
  ck.model = tiny_model(ck.config, 0.25f);
  ASSERT_EQ(ck.model[2 + 2].name, "h.0.attn.c_attn.weight");
  EXPECT_EQ(ck.model[2 + 2].tensor.shape(), (Shape{(4 + 2 * 2) * 2, 8}));
  const std::string dir = save_checkpoint(out.path(), ck);
  const Json config = Json::parse(read_file_contents(dir + "/config.json"));
  EXPECT_EQ(config.at("model_type").as_string(), "flashtrain_gpt2_gqa");
  EXPECT_EQ(config.at("n_kv_head").as_int64(), 2);
  EXPECT_EQ(config.at("architectures").size(), 0u);
  const SafetensorsFile model = load_safetensors(dir + "/model.safetensors");
  EXPECT_EQ(model.at("transformer.h.0.attn.c_attn.weight").shape(), (Shape{8, 16}));  // Conv1D (in, out)

  const Checkpoint back = load_checkpoint(dir);
  EXPECT_EQ(back.config.n_kv_heads, 2);
  ASSERT_EQ(back.model.size(), ck.model.size());
  for (size_t i = 0; i < ck.model.size(); ++i) EXPECT_TRUE(same_bits(back.model[i].tensor, ck.model[i].tensor)) << i;

  // The same dims with multi-head attention do not read it, and say which count differs.
  Gpt2Dims mha = Gpt2Dims::from_config(ck.config);
  mha.n_kv_head = 0;
  const std::string e = test::error_of([&] { load_hf_gpt2_weights(dir, mha); });
  EXPECT_NE(e.find("n_kv_head = 2 (config n_kv_heads = 4, i.e. n_heads)"), std::string::npos) << e;
}

TEST(Checkpoint, FindLatestSkipsTemporaryAndIncomplete) {
  test::ScratchDir out;
  EXPECT_EQ(find_latest_checkpoint(out / "does-not-exist"), std::nullopt);
  EXPECT_EQ(find_latest_checkpoint(out.path()), std::nullopt);
  save_checkpoint(out.path(), make_checkpoint(5));
  save_checkpoint(out.path(), make_checkpoint(10));
  EXPECT_EQ(find_latest_checkpoint(out.path()), out / "ckpt-10");

  // An interrupted write, a newer directory without state.json, one whose model file was cut
  // short, and one whose state names another step: none counts.
  fs::copy(out / "ckpt-10", out / "ckpt-20.tmp", fs::copy_options::recursive);
  fs::copy(out / "ckpt-10", out / "ckpt-30", fs::copy_options::recursive);
  fs::remove(out / "ckpt-30/state.json");
  fs::copy(out / "ckpt-10", out / "ckpt-40", fs::copy_options::recursive);
  fs::resize_file(out / "ckpt-40/model.safetensors", 100);
  fs::copy(out / "ckpt-10", out / "ckpt-50", fs::copy_options::recursive);
  fs::create_directory(out / "ckpt-x");
  EXPECT_FALSE(is_complete_checkpoint(out / "ckpt-50"));  // state.json says step 10
  EXPECT_EQ(find_latest_checkpoint(out.path()), out / "ckpt-10");
  const auto all = list_checkpoints(out.path());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 5);
  EXPECT_EQ(all[1].first, 10);

  // Step order is numeric, not lexical.
  save_checkpoint(out.path(), make_checkpoint(100));
  EXPECT_EQ(find_latest_checkpoint(out.path()), out / "ckpt-100");
}

TEST(Checkpoint, RewritingAStepReplacesIt) {
  test::ScratchDir out;
  save_checkpoint(out.path(), make_checkpoint(7));
  Checkpoint again = make_checkpoint(7);
  again.state.extra.set("run", 2);
  save_checkpoint(out.path(), again);
  EXPECT_EQ(load_checkpoint(out / "ckpt-7").state.extra.at("run").as_int64(), 2);
  EXPECT_FALSE(fs::exists(out / "ckpt-7.old.tmp"));
}

TEST(Checkpoint, PruneKeepsTheNewest) {
  test::ScratchDir out;
  for (int64_t s : {1, 2, 3}) save_checkpoint(out.path(), make_checkpoint(s));
  fs::create_directory(out / "ckpt-4.tmp");
  EXPECT_EQ(prune_checkpoints(out.path(), 0).size(), 1u);  // only the leftover .tmp
  EXPECT_EQ(list_checkpoints(out.path()).size(), 3u);
  const auto removed = prune_checkpoints(out.path(), 2);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], out / "ckpt-1");
  EXPECT_EQ(find_latest_checkpoint(out.path()), out / "ckpt-3");
  EXPECT_TRUE(fs::exists(out / "ckpt-2"));
}

TEST(Checkpoint, PruneRestoresAnOrphanedReplacedCheckpoint) {
  test::ScratchDir out;
  save_checkpoint(out.path(), make_checkpoint(8));
  fs::rename(out / "ckpt-8", out / "ckpt-8.old.tmp");  // a crash between the two renames
  EXPECT_EQ(find_latest_checkpoint(out.path()), std::nullopt);
  EXPECT_TRUE(prune_checkpoints(out.path(), 0).empty());
  EXPECT_EQ(find_latest_checkpoint(out.path()), out / "ckpt-8");
}

TEST(Checkpoint, FailedWriteLeavesThePreviousIntact) {
  test::ScratchDir out;
  save_checkpoint(out.path(), make_checkpoint(3));
  Checkpoint bad = make_checkpoint(6);
  bad.model.pop_back();  // ln_f.bias missing: fails inside the write
  EXPECT_THROW(save_checkpoint(out.path(), bad), Error);
  EXPECT_FALSE(fs::exists(out / "ckpt-6"));
  EXPECT_FALSE(fs::exists(out / "ckpt-6.tmp"));
  EXPECT_EQ(find_latest_checkpoint(out.path()), out / "ckpt-3");
}

}  // namespace
}  // namespace ft
