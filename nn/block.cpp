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
  const Tensor attn_out = attn.forward_without_proj_bias(z, doc_start);  // (B, T, C), + attn.c_proj.bias below
  const autograd::ResidualLayerNorm a = ln_2.forward_residual(x, attn_out, resid_dropout_, attn.c_proj.bias);
  const Tensor mlp_out = mlp.forward_without_proj_bias(a.z);  // (B, T, C), + mlp.c_proj.bias below
  const autograd::ResidualLayerNorm out = next.forward_residual(a.y, mlp_out, resid_dropout_, mlp.c_proj.bias);
  return {out.y, out.z};
}

}  // namespace ft::nn
