// --init-from a Hugging Face GPT-2 directory with more positions than the run's max_seq_len (issue
// 22): the position table is cropped, the first training loss equals `flashtrain eval`'s loss of
// the uncropped model on the same batch, and what cannot be cropped is refused naming both values.
#include <gtest/gtest.h>

#include <iomanip>
#include <sstream>

#include "core/error.h"
#include "data/shard.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/hf_gpt2_names.h"
#include "train/cli/cli.h"
#include "train/evaluate.h"
#include "train/inference_model.h"
#include "train/trainer.h"
#include "trainer_test_util.h"

namespace ft {
namespace {

constexpr int64_t kFilePositions = 64;  // the directory's n_positions
constexpr int64_t kRunT = 32;           // the run's max_seq_len
constexpr int64_t kB = 4;

// config.json as transformers' save_pretrained writes it for a GPT2LMHeadModel, extra fields
// included (most are never read by flashtrain and must not be refused). Its dropouts are 0.1: the
// run's config says 0, and the loss check below fails if the file's were used.
std::string hf_config_json(int64_t n_positions, int64_t n_embd) {
  return str(R"({
  "_name_or_path": "gpt2",
  "activation_function": "gelu_new",
  "architectures": [
    "GPT2LMHeadModel"
  ],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": )", n_positions, R"(,
  "n_embd": )", n_embd, R"(,
  "n_head": 2,
  "n_inner": null,
  "n_layer": 2,
  "n_positions": )", n_positions, R"(,
  "reorder_and_upcast_attn": false,
  "resid_pdrop": 0.1,
  "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "task_specific_params": {
    "text-generation": {
      "do_sample": true,
      "max_length": 50
    }
  },
  "torch_dtype": "float32",
  "transformers_version": "4.46.3",
  "use_cache": true,
  "vocab_size": )", test::kSynthVocab, R"(
}
)");
}

// A random 2-layer GPT-2 (C = 32, n_inner null = 4C) in Hugging Face layout: model.safetensors
// with transformer.* names, Conv1D weights (in, out), no lm_head (tied), metadata format pt.
void write_hf_gpt2(const std::string& dir, int64_t n_positions) {
  const Gpt2Dims d{test::kSynthVocab, n_positions, 32, 2, 2, 128};
  std::vector<NamedTensor> ours;
  uint32_t x = 2024;
  for (const auto& name : gpt2_param_names(d.n_layer)) {
    const Shape s = gpt2_param_shape(name, d);
    // LayerNorm gains near 1, everything else small and nonzero (biases too, so none is a no-op).
    const bool gain = name.find("ln_") != std::string::npos && name.find(".weight") != std::string::npos;
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    for (auto& e : v) {
      x = x * 1664525u + 1013904223u;
      e = (gain ? 1.f : 0.f) + 0.2f * (static_cast<float>(x >> 8) / 16777216.f - 0.5f);
    }
    ours.push_back({name, Tensor::from_vector(v, s)});
  }
  std::filesystem::create_directories(dir);
  save_safetensors(dir + "/model.safetensors", to_hf_gpt2(ours, d), {{"format", "pt"}});
  test::write_text(dir + "/config.json", hf_config_json(n_positions, d.n_embd));
}

// The synthetic trainer config at T = 32, B = 4, dropout 0, file order, one step, over a shard
// holding exactly one batch, so the trainer's first batch and eval's only batch are the same.
TrainConfig finetune_config(const test::ScratchDir& dir) {
  TrainConfig c = test::synthetic_config(dir.path());
  const std::string data = dir / "one_batch.bin";
  write_shard(data, test::synthetic_tokens(kB * kRunT + 1, 3));
  c.train_data = {data};
  c.val_data = {};
  c.max_seq_len = kRunT;
  c.block_size = kRunT;
  c.d_ff = 128;
  c.batch_size = kB;
  c.shuffle = false;
  c.dropout = 0.0;
  c.max_steps = 1;
  return c;
}

// The error a Trainer over finetune_config gives for --init-from hf, or "" when it starts.
std::string init_error(const test::ScratchDir& dir, const std::string& hf) {
  TrainerOptions o;
  o.init_from = hf;
  try {
    Trainer t(finetune_config(dir), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(InitFrom, CroppedPositionsGiveTheFirstLossEvalGives) {
  test::ScratchDir dir;
  const std::string hf = dir / "gpt2-hf";
  write_hf_gpt2(hf, kFilePositions);
  const TrainConfig c = finetune_config(dir);

  TrainerOptions o;
  o.init_from = hf;
  std::ostringstream log;
  o.out = &log;
  Trainer t(c, o);
  const TrainSummary s = t.run();
  ASSERT_EQ(s.losses.size(), 1u);
  EXPECT_NE(log.str().find(str("flashtrain: weights from ", hf, "; its position table (n_positions = 64) cropped to "
                               "the first 32 rows for max_seq_len = 32\n")),
            std::string::npos)
      << log.str();

  // What `flashtrain eval --checkpoint hf --data one_batch.bin --batch-size 4 --seq-len 32` computes
  // (train/cli/eval_command.cpp), at full precision: the file's model with all 64 positions.
  InferenceModel m = load_inference_model(hf);
  ASSERT_EQ(m.config.max_seq_len, kFilePositions);
  ASSERT_TRUE(m.device.is_cpu());  // head dim 16 has no CUDA flash kernel, so device auto is the CPU
  Loader loader(file_order_loader_options(m, c.train_data, kB, kRunT, "eval"));
  const EvalResult e = evaluate(*m.model, loader, 0, m.device);
  ASSERT_EQ(e.batches, 1);
  // Bit-equal on the CPU today (the same f32 kernels on the same batch); the tolerance leaves room
  // for a training step that sums in another order.
  EXPECT_NEAR(s.losses[0], e.loss, 1e-6 * e.loss);

  // The command itself prints the same loss.
  std::istringstream in;
  std::ostringstream out, err;
  ASSERT_EQ(cli_main({"eval", "--checkpoint", hf, "--data", c.train_data[0], "--batch-size", "4", "--seq-len", "32"},
                     in, out, err),
            0)
      << err.str();
  std::ostringstream expect;
  expect << "loss " << std::fixed << std::setprecision(6) << s.losses[0] << " | ";
  EXPECT_EQ(out.str().rfind(expect.str(), 0), 0u) << out.str() << " vs " << expect.str();
}

TEST(InitFrom, SamePositionsLoadWithoutCropping) {
  test::ScratchDir dir;
  const std::string hf = dir / "gpt2-hf";
  write_hf_gpt2(hf, kRunT);
  const InitWeights w = load_hf_gpt2_for_init(hf, Gpt2Dims{test::kSynthVocab, kRunT, 32, 2, 2, 128});
  EXPECT_EQ(w.file_positions, kRunT);
  EXPECT_EQ(w.note, "weights from " + hf);
  const std::vector<NamedTensor> exact = load_hf_gpt2_weights(hf, Gpt2Dims{test::kSynthVocab, kRunT, 32, 2, 2, 128});
  ASSERT_EQ(w.model.size(), exact.size());
  for (size_t i = 0; i < exact.size(); ++i)
    EXPECT_EQ(w.model[i].tensor.to_vector<float>(), exact[i].tensor.to_vector<float>()) << exact[i].name;
}

TEST(InitFrom, CropKeepsTheFirstRows) {
  test::ScratchDir dir;
  const std::string hf = dir / "gpt2-hf";
  write_hf_gpt2(hf, kFilePositions);
  const std::vector<NamedTensor> full = load_hf_gpt2_weights(hf, Gpt2Dims{test::kSynthVocab, kFilePositions, 32, 2, 2, 128});
  const InitWeights w = load_hf_gpt2_for_init(hf, Gpt2Dims{test::kSynthVocab, kRunT, 32, 2, 2, 128});
  ASSERT_EQ(w.model.size(), full.size());
  EXPECT_EQ(w.file_positions, kFilePositions);
  for (size_t i = 0; i < full.size(); ++i) {
    ASSERT_EQ(w.model[i].name, full[i].name);
    std::vector<float> want = full[i].tensor.to_vector<float>();
    if (full[i].name == "wpe.weight") {
      EXPECT_EQ(w.model[i].tensor.shape(), (Shape{kRunT, 32}));
      want.resize(static_cast<size_t>(kRunT * 32));
    }
    EXPECT_EQ(w.model[i].tensor.to_vector<float>(), want) << full[i].name;
  }
}

TEST(InitFrom, FewerPositionsThanMaxSeqLenIsRefused) {
  test::ScratchDir dir;
  const std::string hf = dir / "gpt2-hf";
  write_hf_gpt2(hf, 16);
  EXPECT_EQ(init_error(dir, hf), hf + "/config.json: n_positions = 16 is fewer than the config's max_seq_len = 32; a "
                                      "position table can be cropped but not extended: set max_seq_len to at most 16");
}

// The position count may differ (64 > 32) and is not reported; the other dimensions may not.
TEST(InitFrom, OtherDimensionsMustMatch) {
  test::ScratchDir dir;
  const std::string hf = dir / "gpt2-hf";
  write_hf_gpt2(hf, kFilePositions);
  test::write_text(hf + "/config.json", hf_config_json(kFilePositions, 48));
  EXPECT_EQ(init_error(dir, hf), hf + "/config.json: the model's dimensions differ from the config's: n_embd = 48 "
                                      "(config d_model = 32), n_inner = 192 (config d_ff = 128)");
}

}  // namespace
}  // namespace ft
