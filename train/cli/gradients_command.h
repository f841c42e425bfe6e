// `flashtrain gradients`: one batch through a checkpoint's model, with gradients, written to a
// safetensors file so another implementation can be checked against ours tensor by tensor
// (tests/train/hf_cross_check.py does that with Hugging Face's GPT2LMHeadModel).
//
//   flashtrain gradients --checkpoint DIR --data PATH --out FILE [--batch-size B] [--seq-len T]
//
// The batch is the first B windows of the data in file order (data/loader.h, no shuffle); the
// model runs in eval mode (no dropout) in the checkpoint's precision on its device. FILE holds
//   tokens  (B, T+1) i32    the windows: inputs are [:, :T], targets [:, 1:]
//   logits  (B, T, V) f32   as the model computed them (bf16/f16 values widened on a GPU)
//   loss    (1) f32         mean cross-entropy over the B*T targets
//   grad.<HF name>          d loss / d parameter in f32, in Hugging Face's names and Conv1D
//                           orientation (train/checkpoint/hf_gpt2_names.h), e.g. grad.transformer.wte.weight
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ft {

struct GradientsOptions {
  std::string checkpoint;
  std::vector<std::string> data;
  std::string out;
  int64_t batch_size = 4;
  int64_t seq_len = 0;  // 0 = the checkpoint config's max_seq_len
};

int run_gradients(const GradientsOptions& options, std::ostream& out, std::ostream& err);

}  // namespace ft
