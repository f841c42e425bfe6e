// Multi-head self-attention through the FP8 forward (ops/attention_fp8.h) on a fused qkv buffer,
// for inference (eval, sample): it has no backward, so it refuses to run where a gradient could be
// asked for (grad mode on and qkv requiring one) -- training uses the model's bf16 attention.
//
// qkv (B, T, 3C) as autograd::attention takes it (autograd/functions/attention.h); the result is
// (B, T, C) in qkv's dtype. On a GPU q, k, v are cast to bf16 when qkv is another dtype (the FP8
// quantiser reads bf16); on the CPU the op's emulation runs.
#pragma once

#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/attention_fp8.h"

namespace ft::autograd {

Tensor fp8_attention(const Tensor& qkv, int n_heads, const ops::AttentionOptions& opts,
                     const ops::Fp8AttentionOptions& fp8 = {});

}  // namespace ft::autograd
