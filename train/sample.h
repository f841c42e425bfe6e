// Autoregressive sampling from a GPT-2, without a KV cache: each new token recomputes the model
// over the last max_seq_len tokens (cheap at these sizes, and the same forward the trainer uses).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "nn/gpt.h"

namespace ft {

struct SampleParams {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // > 0: sample among the k most likely tokens only
  uint64_t seed = 0;         // token i draws its uniform from Philox(seed, counter i): reproducible
  int32_t stop_token = -1;   // >= 0: stop after generating it (GPT-2's <|endoftext|> = 50256)
};

// The next token from one row of logits (V floats), with the uniform u in [0, 1).
int32_t pick_token(std::vector<float> logits, double temperature, int64_t top_k, double u);

// Generates up to max_new_tokens ids after `prompt` (non-empty) and returns them (prompt
// excluded). The model should be in eval mode; runs without a graph.
std::vector<int32_t> sample_tokens(nn::GPT& model, const std::vector<int32_t>& prompt, const SampleParams& params);

}  // namespace ft
