#include "train/model_config.h"

#include "data/bpe_tokenizer.h"
#include "ops/document_mask.h"

namespace ft {

static_assert(BpeTokenizer::kEndOfText == ops::kGpt2EotToken, "one <|endoftext|> id for data/ and the document mask");

nn::GPTConfig gpt_config_from(const TrainConfig& cfg) {
  nn::GPTConfig g;
  g.vocab_size = cfg.vocab_size;
  g.max_seq_len = cfg.max_seq_len;
  g.n_layers = cfg.n_layers;
  g.n_heads = cfg.n_heads;
  g.n_kv_heads = cfg.n_kv_heads;
  g.d_model = cfg.d_model;
  g.d_ff = cfg.d_ff;
  g.dropout = cfg.dropout;
  g.activation = cfg.activation == Activation::Relu ? nn::MlpActivation::Relu : nn::MlpActivation::Gelu;
  g.initializer_range = cfg.initializer_range;
  g.use_flash_attention = cfg.use_flash_attention;
  g.deterministic = cfg.deterministic;
  g.head_chunk_mib = cfg.head_chunk_mib;
  g.layernorm_fp32 = cfg.layernorm_fp32;
  g.document_mask = cfg.document_mask;
  g.eot_token = BpeTokenizer::kEndOfText;
  if (cfg.sparse_window_blocks > 0) {
    g.sparse_block_size = cfg.block_size;
    g.sparse_window_blocks = cfg.sparse_window_blocks;
    g.sparse_global_blocks = cfg.sparse_global_blocks;
  }
  return g;
}

}  // namespace ft
