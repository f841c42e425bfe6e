// Differentiable cross-entropy fused with log-softmax (see ops/cross_entropy.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::autograd {

// Per-row losses (...) in fp32 (f64 for f64 logits), with a gradient for logits (..., V) only.
// Ignored rows have loss 0 and contribute no gradient.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index = -1);

// The mean of the per-row losses over the rows whose target is not ignore_index: a scalar.
// `valid_rows` is that count when the caller knows it (the data loader does); left at -1 it is
// counted from the targets, which synchronises the device when they live on a GPU. With no valid
// row the result is NaN (0 / 0), as in PyTorch.
Tensor cross_entropy_mean(const Tensor& logits, const Tensor& targets, int32_t ignore_index = -1,
                          int64_t valid_rows = -1);

// The number of targets that are not ignore_index: cross_entropy_mean's valid_rows when the caller
// does not know it. Synchronises the device when the targets live on a GPU.
int64_t count_valid_rows(const Tensor& targets, int32_t ignore_index = -1);

// The reduction of cross_entropy_mean alone: per-row losses (...) summed (leading axis first)
// and divided by valid_rows (>= 0).
Tensor mean_over_rows(const Tensor& losses, int64_t valid_rows);

}  // namespace ft::autograd
