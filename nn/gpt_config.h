// The model's shape and behaviour. train/ maps its YAML TrainConfig onto this struct; nn/ knows
// nothing of YAML. Defaults are GPT-2 small (124,439,808 parameters with max_seq_len 1024).
#pragma once

#include <cstdint>

namespace ft::nn {

enum class MlpActivation { Gelu, Relu };  // gelu: GPT-2's tanh form

struct GPTConfig {
  int64_t vocab_size = 50257;  // V
  int64_t max_seq_len = 1024;  // rows of the learned position embedding (HF n_positions)
  int64_t n_layers = 12;       // L
  int64_t n_heads = 12;        // H; must divide d_model
  // H_kv: key/value heads, each shared by n_heads / n_kv_heads query heads (grouped-query
  // attention; 1 is multi-query attention). 0 means n_heads: GPT-2's multi-head attention.
  int64_t n_kv_heads = 0;
  int64_t d_model = 768;       // C
  int64_t d_ff = 3072;         // MLP hidden width
  double dropout = 0.1;        // embeddings, attention probabilities, residual branches
  MlpActivation activation = MlpActivation::Gelu;
  double initializer_range = 0.02;  // std of the normal init; residual projections / sqrt(2 L)
  double layer_norm_eps = 1e-5;
  // The LayerNorms' weight and bias stay fp32 in a bf16 / f16 model (nn::LayerNorm): what PyTorch's
  // autocast does. With a bf16 residual stream, bf16 LayerNorm parameters cost one checkpoint's
  // bottom-layer gradients 2.3x the error autocast has (bench/results/hf-cross-check-h200-s38.md).
  bool layernorm_fp32 = true;
  bool use_flash_attention = true;  // false: the naive (materialised S and P) twin
  // Inference only: attention through the FP8 forward (ops/attention_fp8.h: per-tile e4m3 with the
  // Hadamard rotation of q and k). It has no backward: the model refuses to train with it.
  bool fp8_attention = false;
  // Bit-identical gradients for identical inputs: flash attention's backward adds dQ in a fixed
  // order instead of by atomics (ops::AttentionOptions::deterministic; a few % slower on a GPU).
  bool deterministic = true;
  // Block-sparse causal attention (ops/attention.h): 0 is dense causal. Not the sequence length
  // (TrainConfig::block_size is T): a key block kb is visible from query block qb iff
  // qb - sparse_window_blocks < kb <= qb or kb < sparse_global_blocks.
  int64_t sparse_block_size = 0;
  int64_t sparse_window_blocks = 0;
  int64_t sparse_global_blocks = 0;
  // Document mask (ops/document_mask.h): each token attends only within its own document of its
  // row, a document starting at an eot_token. false: plain causal (or block-sparse) attention.
  bool document_mask = false;
  int64_t eot_token = 50256;  // GPT-2's <|endoftext|>; a token id outside the vocabulary never matches
  // The training step's head (autograd::linear_cross_entropy_mean) in chunks of rows holding at most
  // this many MiB of logits each; 0: every row's logits at once; -1: the library's default
  // (autograd::set_head_chunk_bytes, FLASHTRAIN_HEAD_CHUNK_MIB, else kHeadChunkMiB).
  int64_t head_chunk_mib = -1;

  int64_t head_dim() const { return d_model / n_heads; }  // D
  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }  // H_kv
  // Columns of the fused q|k|v projection: (H + 2 H_kv) D (3C for multi-head attention).
  int64_t qkv_dim() const { return (n_heads + 2 * kv_heads()) * head_dim(); }
  // Throws ft::Error naming the field and value ("[gpt] n_heads = 5 must divide d_model = 768").
  void validate() const;
};

}  // namespace ft::nn
