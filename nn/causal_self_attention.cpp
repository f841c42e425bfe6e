#include "nn/causal_self_attention.h"

#include "autograd/functions/attention.h"
#include "autograd/functions/fp8_attention.h"

namespace ft::nn {

CausalSelfAttention::CausalSelfAttention(const GPTConfig& cfg, Generator& gen)
    : c_attn(cfg.d_model, cfg.qkv_dim()),
      c_proj(cfg.d_model, cfg.d_model),
      n_heads_(static_cast<int>(cfg.n_heads)),
      n_kv_heads_(static_cast<int>(cfg.kv_heads())),
      dropout_(cfg.dropout),
      use_flash_(cfg.use_flash_attention),
      fp8_(cfg.fp8_attention),
      gen_(gen) {
  register_module("c_attn", c_attn);
  register_module("c_proj", c_proj);
  base_opts_.causal = true;
  base_opts_.deterministic = cfg.deterministic;
  base_opts_.block_size = static_cast<int>(cfg.sparse_block_size);
  base_opts_.window_blocks = static_cast<int>(cfg.sparse_window_blocks);
  base_opts_.global_blocks = static_cast<int>(cfg.sparse_global_blocks);
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& doc_start) const {
  return c_proj.forward(attend(x, doc_start));  // (B, T, C)
}

Tensor CausalSelfAttention::forward_without_proj_bias(const Tensor& x, const Tensor& doc_start) const {
  return c_proj.forward_without_bias(attend(x, doc_start));  // (B, T, C)
}

Tensor CausalSelfAttention::attend(const Tensor& x, const Tensor& doc_start) const {
  const Tensor qkv = c_attn.forward(x);  // (B, T, (H + 2 H_kv) D)
  ops::AttentionOptions opts = base_opts_;
  opts.doc_start = doc_start;
  if (fp8_) {
    FT_CHECK_ARG(!is_training(), "[attention] FP8 attention is inference only (no backward): put the model in eval ",
                 "mode, or train with the bf16 attention (fp8_attention off)");
    FT_CHECK_ARG(n_kv_heads_ == n_heads_, "[attention] FP8 attention takes multi-head attention only; this model has ",
                 n_kv_heads_, " K/V heads for ", n_heads_, " query heads (n_kv_heads)");
    return autograd::fp8_attention(qkv, n_heads_, opts);  // (B, T, C); refuses doc_start
  }
  if (is_training() && dropout_ > 0) {
    opts.dropout_p = static_cast<float>(dropout_);
    opts.philox = gen_.next(ops::attention_philox_offsets(x.size(0), n_heads_));
  }
  return autograd::attention(qkv, n_heads_, opts, use_flash_, n_kv_heads_);  // (B, T, C)
}

}  // namespace ft::nn
