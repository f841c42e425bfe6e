#include "nn/block.h"

#include "autograd/functions/elementwise.h"

namespace ft::nn {

Block::Block(const GPTConfig& cfg, Generator& gen)
    : ln_1(cfg.d_model, cfg.layer_norm_eps),
      attn(cfg, gen),
      ln_2(cfg.d_model, cfg.layer_norm_eps),
      mlp(cfg),
      resid_dropout_(cfg.dropout, gen) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("mlp", mlp);
  register_module("resid_dropout", resid_dropout_);
}

Tensor Block::forward(const Tensor& x) const {
  const Tensor a = autograd::add(x, resid_dropout_.forward(attn.forward(ln_1.forward(x))));  // (B, T, C)
  return autograd::add(a, resid_dropout_.forward(mlp.forward(ln_2.forward(a))));            // (B, T, C)
}

}  // namespace ft::nn
