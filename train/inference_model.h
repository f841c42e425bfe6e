// A GPT-2 for eval and sampling, built from a checkpoint directory: a flashtrain ckpt-<step>/
// (its state.json gives the whole config) or any Hugging Face GPT-2 directory (config.json gives
// the dimensions; the rest of the config keeps its defaults). No arena, no optimizer: the weights
// are copied into the model's own parameters, and the model is put in eval mode.
#pragma once

#include <memory>
#include <string>

#include "data/loader.h"
#include "nn/gpt.h"
#include "train/config/config.h"

namespace ft {

struct InferenceModel {
  TrainConfig config;
  Device device;
  std::unique_ptr<nn::GPT> model;
};

// The device follows the checkpoint config's `device` (train/device_choice.h). The model computes
// in f32 on the CPU and in the config's mixed_precision dtype on a GPU. fp8_attention: attention
// through the FP8 forward (nn::GPTConfig::fp8_attention; a GPU needs sm_90a, the CPU emulates it).
InferenceModel load_inference_model(const std::string& dir, bool fp8_attention = false);

// A loader over `data` in file order (no shuffle) for the model's vocabulary: batches of
// batch_size windows of seq_len tokens (0: the checkpoint's max_seq_len). A longer seq_len than
// the checkpoint's is an error naming `command` and both lengths.
LoaderOptions file_order_loader_options(const InferenceModel& m, const std::vector<std::string>& data,
                                        int64_t batch_size, int64_t seq_len, const char* command);

}  // namespace ft
