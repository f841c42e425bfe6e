// Global L2 norm of gradients, kept on the device so the trainer never waits for it: the result
// feeds ops::adamw_step (AdamWOptions::grad_norm), which clips by it and skips the step when it
// is not finite, all without a host round trip. Read it on the host only for logging.
//
// Deterministic: a fixed two-stage reduction whose grouping depends only on the sizes (per-thread
// and per-block partial sums in fp64, then one block sums the partials in a fixed order), so the
// same gradients give the same bits on every run and every card.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ft::ops {

struct GradNorm {
  Tensor norm;       // f32 (1): sqrt(sum of squares); inf or NaN when any element is
  Tensor nonfinite;  // f32 (1): 1 when norm is not finite, else 0
};

// The norm of one buffer (the gradient arena) or of several taken together. Tensors are
// contiguous f32 (f64 too on the CPU) on one device.
GradNorm grad_norm(const Tensor& grads);
GradNorm grad_norm(const std::vector<Tensor>& grads);

}  // namespace ft::ops
