#include "train/inference_model.h"

#include <filesystem>
#include <map>

#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/file_util.h"
#include "train/checkpoint/hf_gpt2_names.h"
#include "train/device_choice.h"
#include "train/model_config.h"
#include "train/precision.h"

namespace fs = std::filesystem;

namespace ft {

namespace {

TrainConfig config_of(const std::string& dir) {
  const std::string state = (fs::path(dir) / "state.json").string();
  if (fs::exists(state)) return config_from_json(Json::parse(read_file_contents(state), state).at("config"), state);
  const std::string hf = (fs::path(dir) / "config.json").string();
  FT_CHECK_ARG(fs::exists(hf), dir, ": neither state.json (a flashtrain checkpoint) nor config.json (a Hugging Face GPT-2) is there");
  const Json j = Json::parse(read_file_contents(hf), hf);
  const Gpt2Dims d = gpt2_dims_from_hf_config(j, hf);
  TrainConfig c;
  c.vocab_size = d.vocab_size;
  c.max_seq_len = d.n_positions;
  c.d_model = d.n_embd;
  c.n_layers = d.n_layer;
  c.n_heads = d.n_head;
  c.n_kv_heads = d.grouped() ? d.kv_heads() : 0;
  c.d_ff = d.n_inner;
  c.dropout = 0.0;
  const Json* act = j.find("activation_function");
  if (act && act->is_string() && act->as_string() == "relu") c.activation = Activation::Relu;
  return c;
}

}  // namespace

InferenceModel load_inference_model(const std::string& dir, bool fp8_attention) {
  InferenceModel m;
  m.config = config_of(dir);
  const Device device = resolve_device(m.config);
  m.device = device;
  nn::GPTConfig model_config = gpt_config_from(m.config);
  model_config.fp8_attention = fp8_attention;
  m.model = std::make_unique<nn::GPT>(model_config, m.config.seed);
  const std::vector<NamedTensor> weights = load_hf_gpt2_weights(dir, Gpt2Dims::from_config(m.config));
  std::map<std::string, const Tensor*> by_name;
  for (const NamedTensor& w : weights) by_name[w.name] = &w.tensor;
  {
    autograd::NoGradGuard no_grad;
    m.model->for_each_parameter([&](const std::string& name, Tensor& p) {
      const auto it = by_name.find(name);
      FT_CHECK_ARG(it != by_name.end(), dir, ": no weight for '", name, "'");
      p.copy_(ops::cast(*it->second, p.dtype()));
    });
  }
  m.model->to(device);
  if (device.is_cuda()) m.model->to(compute_dtype(m.config.mixed_precision));
  m.model->eval();
  return m;
}

LoaderOptions file_order_loader_options(const InferenceModel& m, const std::vector<std::string>& data,
                                        int64_t batch_size, int64_t seq_len, const char* command) {
  const int64_t T = seq_len > 0 ? seq_len : m.config.max_seq_len;
  if (T > m.config.max_seq_len)
    throw Error(str(command, ": --seq-len ", T, " exceeds the checkpoint's max_seq_len = ", m.config.max_seq_len));
  LoaderOptions lo;
  lo.inputs = data;
  lo.split = "val";
  lo.batch_size = batch_size;
  lo.seq_len = T;
  lo.shuffle = false;
  lo.vocab_size = static_cast<int32_t>(m.config.vocab_size);
  return lo;
}

}  // namespace ft
