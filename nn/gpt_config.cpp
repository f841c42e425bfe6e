#include "nn/gpt_config.h"

#include <cstdint>

#include "core/error.h"

namespace ft::nn {

void GPTConfig::validate() const {
  FT_CHECK_ARG(vocab_size >= 1, "[gpt] vocab_size must be >= 1, got ", vocab_size);
  FT_CHECK_ARG(max_seq_len >= 1, "[gpt] max_seq_len must be >= 1, got ", max_seq_len);
  FT_CHECK_ARG(n_layers >= 1, "[gpt] n_layers must be >= 1, got ", n_layers);
  FT_CHECK_ARG(n_heads >= 1 && d_model >= 1 && d_model % n_heads == 0, "[gpt] n_heads = ", n_heads,
               " must divide d_model = ", d_model);
  FT_CHECK_ARG(n_kv_heads >= 0 && n_heads % kv_heads() == 0, "[gpt] n_heads = ", n_heads,
               " must be a multiple of n_kv_heads = ", n_kv_heads, " (0 means n_heads)");
  FT_CHECK_ARG(d_ff >= 1, "[gpt] d_ff must be >= 1, got ", d_ff);
  FT_CHECK_ARG(dropout >= 0 && dropout < 1, "[gpt] dropout must be in [0, 1), got ", dropout);
  FT_CHECK_ARG(initializer_range >= 0, "[gpt] initializer_range must be >= 0, got ", initializer_range);
  FT_CHECK_ARG(sparse_block_size >= 0, "[gpt] sparse_block_size must be >= 0, got ", sparse_block_size);
  if (sparse_block_size > 0)
    FT_CHECK_ARG(sparse_window_blocks >= 1 && sparse_global_blocks >= 0, "[gpt] sparse attention (block size ",
                 sparse_block_size, ") needs sparse_window_blocks >= 1 and sparse_global_blocks >= 0, got ",
                 sparse_window_blocks, " and ", sparse_global_blocks);
  FT_CHECK_ARG(eot_token >= 0 && eot_token <= INT32_MAX, "[gpt] eot_token must be a token id in [0, 2^31), got ",
               eot_token);
  FT_CHECK_ARG(head_chunk_mib >= -1 && head_chunk_mib <= (int64_t{1} << 40),
               "[gpt] head_chunk_mib must be a size in MiB (0: no chunks; -1: the default), got ", head_chunk_mib);
}

}  // namespace ft::nn
