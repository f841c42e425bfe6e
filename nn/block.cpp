#include "nn/block.h"

namespace ft::nn {

Block::Block(const GPTConfig& cfg, Generator& gen)
    : ln_1(cfg.d_model, cfg.layer_norm_eps, cfg.layernorm_fp32),
      attn(cfg, gen),
      ln_2(cfg.d_model, cfg.layer_norm_eps, cfg.layernorm_fp32),
      mlp(cfg),
      resid_dropout_(cfg.dropout, gen) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("mlp", mlp);
  register_module("resid_dropout", resid_dropout_);
}

Block::Output Block::forward(const Tensor& x, const Tensor& z, const LayerNorm& next, const Tensor& doc_start) const {
  // The branches run before their fused add draws its dropout state: the unfused order (attention
  // dropout, then the residual dropout), so the masks are those of x + dropout(branch).
  const Tensor attn_out = attn.forward(z, doc_start);                                   // (B, T, C)
  const autograd::ResidualLayerNorm a = ln_2.forward_residual(x, attn_out, resid_dropout_);  // a, ln_2(a)
  const Tensor mlp_out = mlp.forward(a.z);                                              // (B, T, C)
  const autograd::ResidualLayerNorm out = next.forward_residual(a.y, mlp_out, resid_dropout_);
  return {out.y, out.z};
}

}  // namespace ft::nn
