// Front-door checks shared by the attention ops (ops/attention.cpp, ops/attention_fp8.cpp).
#pragma once

#include <string>

#include "core/tensor.h"

namespace ft::ops {

// "(2, 5, 4, 8) strides (480, 96, 8, 1) bf16 on cuda:0": what every layout error shows.
std::string describe_attention_operand(const Tensor& t);

// A (B, T, H, D) operand: the shape, dtype and device of q, a contiguous last dim, and on CUDA the
// kernels' stride and alignment rules (batch, time, head strides multiples of 8 elements; 16-byte
// aligned start). Throws ft::Error naming `op` and `name`.
void check_attention_operand(const char* op, const char* name, const Tensor& t, const Tensor& q);
// The same against an expected `shape` ((B, T, H_kv, D) for k, v, dk, dv under grouped-query attention).
void check_attention_operand(const char* op, const char* name, const Tensor& t, const Tensor& q, const Shape& shape);

}  // namespace ft::ops
