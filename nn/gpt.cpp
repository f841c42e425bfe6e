#include "nn/gpt.h"

#include <cstdlib>
#include <numeric>
#include <string>

#include "autograd/functions/cross_entropy.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/linear_cross_entropy.h"
#include "autograd/functions/linear_cross_entropy_mean.h"
#include "autograd/functions/matmul.h"
#include "nn/init.h"
#include "ops/document_mask.h"

namespace ft::nn {
namespace {

const GPTConfig& validated(const GPTConfig& cfg) {
  cfg.validate();
  return cfg;
}

}  // namespace

GPT::GPT(const GPTConfig& cfg, uint64_t seed)
    : cfg_(validated(cfg)),
      gen_(seed),
      wte(cfg.vocab_size, cfg.d_model),
      wpe(cfg.max_seq_len, cfg.d_model),
      ln_f(cfg.d_model, cfg.layer_norm_eps, cfg.layernorm_fp32),
      emb_dropout_(cfg.dropout, gen_) {
  register_module("wte", wte);
  register_module("wpe", wpe);
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    h.push_back(std::make_unique<Block>(cfg_, gen_));
    register_module("h." + std::to_string(i), *h.back());
  }
  register_module("ln_f", ln_f);
  register_module("emb_dropout", emb_dropout_);
  std::vector<int32_t> pos(static_cast<size_t>(cfg.max_seq_len));
  std::iota(pos.begin(), pos.end(), 0);
  register_buffer("positions", positions_, Tensor::from_vector(pos, {cfg.max_seq_len}));
  init_gpt2_parameters(*this, cfg.initializer_range, cfg.n_layers, seed);
}

GPTOutput GPT::forward(const Tensor& idx, const Tensor& targets, int64_t valid_targets,
                       const Tensor& grad_scale_hint) const {
  FT_CHECK_ARG(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::I32, "[gpt] idx must be (B, T) int32, got ",
               idx.defined() ? str(idx.shape(), " ", idx.dtype()) : std::string("undefined"));
  const int64_t T = idx.size(1);
  FT_CHECK_ARG(T >= 1 && T <= cfg_.max_seq_len, "[gpt] sequence length T = ", T, " must be in [1, max_seq_len = ",
               cfg_.max_seq_len, "]");
  FT_CHECK_ARG(idx.device() == wte.weight.device(), "[gpt] idx is on ", idx.device(), ", the model on ",
               wte.weight.device());
  const Tensor tok = wte.forward(idx);                        // (B, T, C)
  const Tensor pos = wpe.forward(positions_.slice(0, 0, T));  // (T, C), broadcast over B
  Tensor x = emb_dropout_.forward(autograd::add(tok, pos));   // (B, T, C)
  // The document mask's starts, once per batch for every layer; made on the device from idx, so a
  // captured step recomputes them from the token buffer on each replay.
  const Tensor doc_start =
      cfg_.document_mask ? ops::document_starts(idx, static_cast<int32_t>(cfg_.eot_token)) : Tensor();  // (B, T)
  // Each residual add is fused with the LayerNorm after it (nn/block.h); the last block's applies
  // ln_f, so after the loop z is ln_f of the final residual stream.
  Tensor z = h.front()->ln_1.forward(x);  // (B, T, C)
  for (size_t i = 0; i < h.size(); ++i) {
    const Block::Output out = h[i]->forward(x, z, i + 1 < h.size() ? h[i + 1]->ln_1 : ln_f, doc_start);
    x = out.x;
    z = out.z;
  }
  x = z;  // (B, T, C), ln_f applied
  GPTOutput out;
  if (targets.defined()) {
    FT_CHECK_ARG(targets.shape() == idx.shape() && targets.dtype() == DType::I32, "[gpt] targets must be (B, T) = ",
                 idx.shape(), " int32 like idx, got ", targets.shape(), " ", targets.dtype());
    if (valid_targets < 0) valid_targets = autograd::count_valid_rows(targets);
    // FLASHTRAIN_TWO_PASS_HEAD=1 (benchmarks only): the two-pass head even with a hint, to time both.
    static const bool two_pass_forced = [] {
      const char* v = std::getenv("FLASHTRAIN_TWO_PASS_HEAD");
      return v != nullptr && std::string(v) == "1";
    }();
    if (grad_scale_hint.defined() && !two_pass_forced) {
      // The training step: one pass over the logits makes the loss and dlogits (in place).
      const autograd::LinearCrossEntropyMeanOut head =
          autograd::linear_cross_entropy_mean(x, wte.weight, targets, valid_targets, grad_scale_hint, -1,
                                              {cfg_.head_chunk_mib < 0 ? -1 : cfg_.head_chunk_mib << 20});
      out.logits = head.logits;  // (B, T, V), dlogits when gradients are recorded (undefined in chunks)
      out.loss = head.loss;      // scalar
      return out;
    }
    // Tied head and loss in one op: its backward turns the logits' buffer into dlogits in place.
    const autograd::LinearCrossEntropyOut head = autograd::linear_cross_entropy(x, wte.weight, targets);
    out.logits = head.logits;                                       // (B, T, V)
    out.loss = autograd::mean_over_rows(head.loss, valid_targets);  // scalar
    return out;
  }
  MatmulOptions head;
  head.trans_b = true;     // tied head: x wte^T, wte stored (V, C)
  head.align_rows = true;  // V = 50257: logits rows padded to 16 bytes (MatmulOptions)
  out.logits = autograd::matmul(x, wte.weight, head);  // (B, T, V)
  return out;
}

}  // namespace ft::nn
