// Checkpoint directories:
//
//   out_dir/ckpt-<step>/model.safetensors      Hugging Face GPT-2 names and layout (Conv1D weights
//                                              (in, out)), metadata {"format": "pt"}: loads with
//                                              GPT2LMHeadModel.from_pretrained(dir) as it is
//                       config.json            GPT2Config (train/checkpoint/hf_gpt2_names.h)
//                       optimizer.safetensors  the optimizer's tensors under the caller's names
//                                              (AdamW m and v; master weights when they are kept
//                                              apart from the model weights)
//                       state.json             {"format": "flashtrain-checkpoint", "version": 1,
//                                              "step", "config", "rng": {"seed", "offset"},
//                                              "data_position", "loss_scaler", "files"}
//
// Everything is written into out_dir/ckpt-<step>.tmp/ (state.json last, recording the size of
// every other file), flushed, and the directory is renamed to ckpt-<step>: a crash at any point
// leaves either the complete new checkpoint or none, and never touches the older ones.
// A checkpoint is complete when its state.json parses, names the directory's step, and every
// file it lists exists with the recorded size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/philox.h"
#include "train/checkpoint/hf_gpt2_names.h"
#include "train/checkpoint/safetensors.h"
#include "train/config/config.h"
#include "train/config/json.h"

namespace ft {

struct TrainState {
  int64_t step = 0;              // optimizer steps completed
  PhiloxState rng;               // the generator's {seed, offset} after `step`
  Json data_position;            // opaque to train/: the loader's position (data/loader.h)
  Json loss_scaler;              // opaque: {"scale", "good_steps"} in fp16, null otherwise
  Json extra = Json::object();   // anything else the trainer wants back (e.g. tokens seen)
};

struct Checkpoint {
  TrainConfig config;
  std::vector<NamedTensor> model;      // our parameter names and orientation (hf_gpt2_names.h)
  std::vector<NamedTensor> optimizer;  // caller's names
  TrainState state;
};

// Writes out_dir/ckpt-<state.step>/ atomically (see above) and returns its path. Replaces an
// existing checkpoint of the same step (the old one is removed only once the new one is in place).
std::string save_checkpoint(const std::string& out_dir, const Checkpoint& ckpt);

// Reads a checkpoint directory written by save_checkpoint. The model comes back in our names and
// orientation; its dimensions are checked against the stored config.
Checkpoint load_checkpoint(const std::string& dir);

// Model weights only, from any directory holding a HF GPT-2 model.safetensors and config.json
// (a flashtrain checkpoint or a GPT-2 the user already has): for --init-from and eval/sample.
// Throws when the directory's dimensions differ from `dims`.
std::vector<NamedTensor> load_hf_gpt2_weights(const std::string& dir, const Gpt2Dims& dims);

// The weights --init-from starts a run from.
struct InitWeights {
  std::vector<NamedTensor> model;  // our names and orientation, in the shapes of the run's dims
  int64_t file_positions = 0;      // the directory's n_positions (>= the run's)
  std::string note;                // one line for the start-of-run summary: where from, what was cropped
};
// Like load_hf_gpt2_weights, for fine-tuning: a directory with more positions than
// dims.n_positions (OpenAI's GPT-2 has 1024) is accepted and its position table cropped to the
// first dims.n_positions rows, as nanoGPT's crop_block_size does. Causal attention lets position t
// see only positions <= t, so the cropped model computes exactly what the full one computes on
// sequences of that length. Fewer positions, or any other dimension that differs, is an error
// naming the file's value and the config's. Only dimensions are read from config.json: dropout
// and every training setting stay the run's.
InitWeights load_hf_gpt2_for_init(const std::string& dir, const Gpt2Dims& dims);

// The newest complete checkpoint directory in out_dir (by step), or nullopt when there is none.
// Temporary (.tmp) and incomplete directories are skipped.
std::optional<std::string> find_latest_checkpoint(const std::string& out_dir);
// Complete checkpoints in out_dir, oldest first, as (step, path).
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& out_dir);
// Whether `dir` is a complete checkpoint (see above).
bool is_complete_checkpoint(const std::string& dir);
// Deletes all but the newest `keep` complete checkpoints (keep = 0: deletes none), and leftover
// ckpt-*.tmp directories from interrupted writes (restoring a ckpt-N.old.tmp whose ckpt-N is
// missing). Returns the deleted paths.
std::vector<std::string> prune_checkpoints(const std::string& out_dir, int64_t keep);

}  // namespace ft
