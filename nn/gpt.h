// GPT-2: token and learned position embeddings, dropout, L pre-LayerNorm blocks, ln_f, and an
// output head tied to the token embedding (logits = x wte^T, no separate lm_head weight).
//
// Parameter names follow Hugging Face's GPT2Model (GPT2LMHeadModel's "transformer." prefix
// dropped): wte.weight, wpe.weight, h.{i}.ln_1.{weight,bias}, h.{i}.attn.c_attn.{weight,bias},
// h.{i}.attn.c_proj.{weight,bias}, h.{i}.ln_2.{weight,bias}, h.{i}.mlp.c_fc.{weight,bias},
// h.{i}.mlp.c_proj.{weight,bias}, ln_f.{weight,bias}. Linear weights are stored (out, in) like
// PyTorch's nn.Linear -- the transpose of HF's Conv1D (in, out) -- so a checkpoint writer
// transposes the four matrices of each block.
//
// All randomness of a forward pass (dropout on embeddings, attention probabilities and residual
// branches) comes from generator(); eval mode draws nothing. Its state is the model's RNG state.
#pragma once

#include <memory>
#include <vector>

#include "core/random.h"
#include "nn/block.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/gpt_config.h"
#include "nn/layer_norm.h"

namespace ft::nn {

struct GPTOutput {
  // (B, T, V), the parameters' dtype. With targets, the head and the loss are one op
  // (autograd::linear_cross_entropy) whose backward reuses this buffer for dlogits: read the
  // logits before calling backward on the loss. With a grad_scale_hint while gradients are
  // recorded (the training step), the forward itself already turned them into dlogits
  // (autograd::linear_cross_entropy_mean): not readable as logits at all, and undefined where
  // that head runs in chunks of rows (GPT-2-small's training step).
  Tensor logits;
  Tensor loss;  // scalar mean cross-entropy over the targets; undefined without targets
};

class GPT : public Module {
 public:
  // Builds the model on the CPU in f32 and initialises it (init_gpt2_parameters) from `seed`;
  // the dropout generator starts at (seed, 0). Move it with to(device) / to(dtype).
  explicit GPT(const GPTConfig& cfg, uint64_t seed = 1337);

  // idx (B, T) int32 token ids, T <= max_seq_len; targets (B, T) int32 or undefined, -1 marking
  // positions without a target. valid_targets is the count of targets != -1 when the caller knows
  // it (the data loader does: B * T); -1 makes the loss count them, a device sync on a GPU.
  // grad_scale_hint (the training step): the () f32 backward seed the caller is about to pass to
  // backward (fp16's loss scale, else 1), in device memory. Given, with targets, while gradients
  // are recorded, the loss is the one-pass head autograd::linear_cross_entropy_mean: its forward
  // writes dlogits over the logits for that seed (any seed still gives the exact gradient), so
  // out.logits are not readable (FLASHTRAIN_TWO_PASS_HEAD=1 forces the two-pass head, for benchmarks).
  // Undefined: the two-pass head; the logits stay readable until
  // backward.
  GPTOutput forward(const Tensor& idx, const Tensor& targets = Tensor(), int64_t valid_targets = -1,
                    const Tensor& grad_scale_hint = Tensor()) const;

  const GPTConfig& config() const { return cfg_; }
  Generator& generator() { return gen_; }

 private:
  GPTConfig cfg_;
  Generator gen_;  // declared before the modules that keep a reference to it

 public:
  Embedding wte;  // (V, C), also the output head
  Embedding wpe;  // (max_seq_len, C)
  std::vector<std::unique_ptr<Block>> h;
  LayerNorm ln_f;

 private:
  Dropout emb_dropout_;
  Tensor positions_;  // (max_seq_len) int32 0, 1, ...: a buffer, so no host copy per step
};

}  // namespace ft::nn
