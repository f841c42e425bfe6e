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

// grads[i] += addends[i][0] + addends[i][1] + ... (summed in that order, in f32), then the norm of
// the results, in the same pass: ZeRO-1 over the copy engines adds the shards it received from the
// other ranks as it takes their norm (train/zero1.h), where an add pass and a norm pass would read
// the same memory twice. Bits: those of add_ for each addend in turn, then grad_norm. grads: as
// above, f32; addends[i]: contiguous, grads[i]'s numel, one dtype for all (f32, or bf16 / f16
// widened as they are added); addends may be empty (a plain norm of that tensor).
GradNorm add_then_grad_norm(const std::vector<Tensor>& grads, const std::vector<std::vector<Tensor>>& addends);

}  // namespace ft::ops
