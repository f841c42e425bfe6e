// Parameter initialisation, drawn on the CPU from a seeded std::mt19937_64 (so a seed gives the
// same weights on every device and build) and then copied into the parameter where it lives.
#pragma once

#include <cstdint>
#include <random>

#include "core/tensor.h"
#include "nn/module.h"

namespace ft::nn {

// Fills t (any device, floating dtype) with normal(0, std) values, in element order.
void init_normal_(Tensor& t, double std, std::mt19937_64& rng);
void init_constant_(Tensor& t, double value);

// GPT-2's scheme (as Hugging Face's GPT2PreTrainedModel._init_weights): matrices and embeddings
// normal(0, std), the residual projections (names ending "c_proj.weight") normal(0,
// std / sqrt(2 n_layers)), biases 0, LayerNorm weights 1. Walks the parameters in registration
// order with one generator seeded by `seed`.
void init_gpt2_parameters(Module& model, double std, int64_t n_layers, uint64_t seed);

}  // namespace ft::nn
