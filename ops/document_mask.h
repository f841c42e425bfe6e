// Document starts for the document mask of attention (ops/attention.h, AttentionOptions::doc_start).
//
// A row of the token batch packs documents back to back; data/prepare.h writes each document as
// <|endoftext|> followed by its tokens, so an end-of-text token STARTS a document, and the tokens
// before a row's first one (the tail of a document cut by the row boundary) form a segment of
// their own. doc_start[b, t] is the position of that start: the largest s <= t with
// tokens[b, s] == eot_token, else 0. It is non-decreasing along t and at most t: the contract the
// attention front door asks for.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::ops {

// The end-of-text token of the GPT-2 BPE vocabulary (<|endoftext|>), the separator data/ writes.
constexpr int32_t kGpt2EotToken = 50256;

// tokens (B, T) int32 (any strides) -> doc_start (B, T) int32 contiguous, on tokens' device.
// CUDA: one kernel, no host sync, so it runs inside a captured CUDA graph.
Tensor document_starts(const Tensor& tokens, int32_t eot_token = kGpt2EotToken);

}  // namespace ft::ops
