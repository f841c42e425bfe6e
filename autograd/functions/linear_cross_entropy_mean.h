// The training step's head and MEAN loss as one differentiable op, with the loss's backward pass
// folded into the forward (what llm.c's fused classifier does). It computes
//   mean_over_rows(linear_cross_entropy(x, w, targets, ignore_index).loss, valid_rows)
// -- the scalar mean cross-entropy of the logits x w^T over the valid rows -- with gradients for
// x and w, but makes ONE pass over the (rows, V) logits instead of two.
//
// Why it is exact for any upstream gradient g: the mean's gradient with respect to the logits is
// (softmax - onehot(target)) * g / valid_rows, and g is only known when backward runs. The
// forward (when gradients are recorded) writes the gradient for g = hint,
//   dlogits = (softmax - onehot(target)) * hint / valid_rows,
// over the logits in place in the same kernel that computes the losses (ops::
// cross_entropy_loss_and_grad_: each row read once, written once); the backward's two products
// dx = dlogits w and dw += dlogits^T x then take alpha = g / hint, computed on the device and
// read by cuBLASLt from device memory (MatmulOptions::alpha_scale). So nothing touches dlogits
// again, nothing is read back to the host, and a captured CUDA graph replays it with whatever g
// and hint its device memory holds at each replay.
//
// The hint only decides the scale at which dlogits are stored in the half dtype: fp16's
// (rows, V) dlogits / valid_rows would underflow without the loss scale, so pass the backward seed
// you are going to use (the trainer passes the very seed tensor: g / hint is then exactly 1 and the
// step computes what the two-pass head computed). It must be positive and finite; it is not
// checked (that would read device memory). Undefined means 1.
//
// Without recorded gradients (evaluation, no_grad) it is the forward-only path:
// ops::cross_entropy_forward and the mean, and the logits stay readable.
//
// Memory: with gradients recorded and the (rows, Vp) logits over kHeadChunkMiB (GPT-2-small's
// training step: 16384 x 50304 bf16, 1.6 GB), it runs in chunks of rows (what Liger-Kernel's fused
// linear cross-entropy does): each chunk's logits become its dlogits and feed the backward's two
// products at once, into dx's rows and into dw, summed over the chunks in fp32; the backward then
// only multiplies both by g / hint (ops::add_scaled_: dw straight into a preset fp32 gradient). One
// chunk's logits live at a time, plus dx and an fp32 dw: 412 + 25 + 155 MB instead of 1.6 GB for
// GPT-2-small, for one more pass over the fp32 dw a chunk. The logits then come back undefined.
// The budget: HeadChunking's, else set_head_chunk_bytes's, else FLASHTRAIN_HEAD_CHUNK_MIB's, else
// kHeadChunkMiB (0: never chunk); HeadChunking::rows > 0 sets a chunk's rows directly (tests).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::autograd {

// The most bytes of logits one chunk holds by default (see above).
constexpr int64_t kHeadChunkMiB = 512;
// The budget process-wide, in bytes (0: never chunk; -1: back to the environment or the default).
void set_head_chunk_bytes(int64_t bytes);

// How one call splits its rows (see above).
struct HeadChunking {
  int64_t budget_bytes = -1;  // the most logits bytes a chunk holds; 0: no chunks; -1: the process's budget
  int64_t rows = 0;           // > 0: this many rows a chunk, whatever the budget
};

struct LinearCrossEntropyMeanOut {
  Tensor loss;  // () fp32 (f64 for f64 x): the per-row losses summed, over valid_rows
  // (..., V) x w^T, without a gradient of its own. When gradients are recorded it ALREADY holds
  // dlogits (times hint / valid_rows) when the op returns: do not read it as logits then; and in
  // chunks (see above) it is undefined.
  Tensor logits;
};

// x (..., C) bf16/f16/f32 (f64 on the CPU); w (V, C) in x's dtype; targets (...) int32, rows whose
// target is ignore_index have no loss and no gradient; valid_rows: the number of the other rows
// (-1: counted from the targets, a device sync on a GPU). grad_scale_hint: undefined, or one
// element of the loss's dtype (f32; f64 for f64 x) on x's device (see above).
LinearCrossEntropyMeanOut linear_cross_entropy_mean(const Tensor& x, const Tensor& w, const Tensor& targets,
                                                    int64_t valid_rows, const Tensor& grad_scale_hint = Tensor(),
                                                    int32_t ignore_index = -1, const HeadChunking& chunking = {});

}  // namespace ft::autograd
