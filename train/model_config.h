// TrainConfig (YAML) -> nn::GPTConfig (the model's own struct; nn/ knows nothing of YAML).
#pragma once

#include "nn/gpt_config.h"
#include "train/config/config.h"

namespace ft {

// T is max_seq_len; block_size is the block of the sparse attention mode and reaches the model
// only when sparse_window_blocks > 0.
nn::GPTConfig gpt_config_from(const TrainConfig& cfg);

}  // namespace ft
