// Dropout with a regenerated mask (core/dropout_mask.h): nothing but the PhiloxState is needed
// to replay it, so the backward pass stores no mask.
//
// x is viewed as 2-D: rows = numel / last_dim, cols = last_dim (a 0-d tensor is one element).
// Element (row, col) is kept iff dropout_keep_at(make_dropout_params(state, p), 0, row, col);
// kept elements are multiplied by 1 / (1 - p), dropped ones become 0.
//
// A call consumes kDropoutOffsets Philox offsets: callers take the state from their Generator
// with gen.next(kDropoutOffsets), and pass that same state to dropout_backward.
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "core/tensor.h"

namespace ft::ops {

constexpr uint64_t kDropoutOffsets = 1;  // one slice (slice 0) of the mask function

// y = x * mask / (1 - p), p in [0, 1]; any floating dtype, any device. p = 1 gives zeros.
Tensor dropout(const Tensor& x, float p, PhiloxState state);
// dx = dy * mask / (1 - p) with the mask of the forward call that got the same (p, state) and a
// tensor of the same shape.
Tensor dropout_backward(const Tensor& dy, float p, PhiloxState state);

}  // namespace ft::ops
