// `flashtrain gradients` on the CPU: the file's layout, the loss against a cross-entropy
// recomputed here in double from the written logits, and the gradients against a central finite
// difference of the loss along the gradient itself (an independent check of the whole backward:
// (L(w + eps g) - L(w - eps g)) / (2 eps) must equal |g|^2).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "data/shard.h"
#include "tests/train/train_test_util.h"
#include "tests/train/trainer_test_util.h"
#include "train/checkpoint/safetensors.h"
#include "train/cli/cli.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace ft {
namespace {

int cli(const std::vector<std::string>& args) {
  std::istringstream in;
  std::ostringstream out, err;
  const int rc = cli_main(args, in, out, err);
  EXPECT_EQ(rc, 0) << err.str();
  return rc;
}

SafetensorsFile gradients_of(const std::string& ckpt, const std::string& data, const std::string& out) {
  cli({"gradients", "--checkpoint", ckpt, "--data", data, "--out", out, "--batch-size", "2"});
  return load_safetensors(out);
}

// A copy of checkpoint `from` whose weights are w + eps * grad(w).
void write_shifted(const std::string& from, const std::string& to, const SafetensorsFile& grads, double eps) {
  fs::copy(from, to, fs::copy_options::recursive);
  const SafetensorsFile model = load_safetensors(from + "/model.safetensors");
  std::vector<NamedTensor> shifted;
  for (const auto& t : model.tensors) {
    const std::vector<float> w = t.tensor.to_floats();
    const std::vector<float> g = grads.at("grad." + t.name).to_floats();
    std::vector<float> v(w.size());
    for (size_t i = 0; i < w.size(); ++i) v[i] = static_cast<float>(w[i] + eps * g[i]);
    shifted.push_back({t.name, Tensor::from_vector(v, t.tensor.shape())});
  }
  save_safetensors(to + "/model.safetensors", shifted, model.metadata);
}

TEST(GradientsCommand, LossLogitsAndGradientsAreConsistent) {
  test::ScratchDir dir;
  TrainConfig cfg = test::synthetic_config(dir.path());
  cfg.max_steps = 5;  // trained a little, so the gradients are not those of the initialisation
  TrainSummary s = Trainer(cfg).run();
  const std::string ckpt = s.last_checkpoint;
  ASSERT_FALSE(ckpt.empty());
  // One batch of 2 windows of T = 16: 33 tokens.
  const std::vector<int32_t> ids = test::synthetic_tokens(33, 9);
  write_shard(dir / "one_batch.bin", ids);

  const SafetensorsFile f = gradients_of(ckpt, dir / "one_batch.bin", dir / "g.safetensors");
  ASSERT_EQ(f.at("tokens").shape(), Shape({2, 17}));
  ASSERT_EQ(f.at("logits").shape(), Shape({2, 16, test::kSynthVocab}));
  // Window b holds tokens [b*T, b*T + T] (data/loader.h): consecutive windows share one token.
  const std::vector<int32_t> written = f.at("tokens").to_vector<int32_t>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 17; ++j) EXPECT_EQ(written[b * 17 + j], ids[b * 16 + j]) << b << ", " << j;

  // The loss is the mean cross-entropy of the written logits (double here).
  const std::vector<float> logits = f.at("logits").to_floats();
  double ce = 0;
  for (int64_t r = 0; r < 32; ++r) {
    const int64_t b = r / 16, t = r % 16;
    const float* row = logits.data() + r * test::kSynthVocab;
    double mx = row[0], sum = 0;
    for (int64_t v = 1; v < test::kSynthVocab; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (int64_t v = 0; v < test::kSynthVocab; ++v) sum += std::exp(row[v] - mx);
    ce += std::log(sum) + mx - row[ids[static_cast<size_t>(b * 16 + t + 1)]];
  }
  const double loss = f.at("loss").to_floats()[0];
  EXPECT_NEAR(loss, ce / 32, 1e-5);

  // Every parameter has a gradient with the checkpoint's (HF) name and shape.
  const SafetensorsFile model = load_safetensors(ckpt + "/model.safetensors");
  double g2 = 0;
  for (const auto& t : model.tensors) {
    const Tensor* g = f.find("grad." + t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_EQ(g->shape(), t.tensor.shape()) << t.name;
    for (double v : g->to_doubles()) g2 += v * v;
  }
  ASSERT_GT(g2, 0);

  // Central difference along g: eps chosen so the loss moves by about 1e-2.
  const double eps = 5e-3 / g2;
  write_shifted(ckpt, dir / "plus", f, eps);
  write_shifted(ckpt, dir / "minus", f, -eps);
  const double lp = gradients_of(dir / "plus", dir / "one_batch.bin", dir / "gp.safetensors").at("loss").to_floats()[0];
  const double lm = gradients_of(dir / "minus", dir / "one_batch.bin", dir / "gm.safetensors").at("loss").to_floats()[0];
  EXPECT_NEAR((lp - lm) / (2 * eps), g2, 2e-3 * g2) << "loss " << loss << " -> " << lm << " / " << lp;
}

TEST(GradientsCommand, MissingOutIsAUsageError) {
  std::istringstream in;
  std::ostringstream out, err;
  EXPECT_EQ(cli_main({"gradients", "--checkpoint", "x", "--data", "y"}, in, out, err), 2);
  EXPECT_NE(err.str().find("--out is required"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace ft
