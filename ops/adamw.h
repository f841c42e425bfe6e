// The fused AdamW step over flat fp32 buffers (PyTorch's torch.optim.AdamW semantics).
//
// For every element, in one pass over memory:
//   g  = grad * grad_scale * clip                    (clip: see below; 1 without clipping)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g^2
//   p  = p * (1 - lr * weight_decay)                  (decoupled weight decay)
//   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
//   working_copy = round(p)                           (bf16/f16, when given)
// Bytes moved: read p, g, m, v; write p, m, v (+ the working copy): 28 (+2) bytes per element.
//
// Weight decay is per call: the trainer calls adamw_step once per region of the parameter arena
// (decayed matrices with weight_decay > 0, biases and LayerNorm gains with 0), so no mask is read.
//
// Clipping and overflow without a host round trip: pass the one-element f32 tensor from
// ops::grad_norm(grads) as grad_norm. The kernel reads it on the device:
//   * grad_norm not finite (an inf/NaN gradient, e.g. an f16 loss-scale overflow): the step is
//     skipped -- p, m, v and the working copy are left untouched. The host learns of it when it
//     next reads the norm (the loss scaler must; bias correction still counts `step` as given).
//   * max_grad_norm > 0: clip = min(1, max_grad_norm / (grad_norm * grad_scale + 1e-6)), as
//     torch.nn.utils.clip_grad_norm_ does; grad_norm is the norm of the buffer as stored, so
//     grad_scale (e.g. 1 / loss_scale, 1 / accumulation steps) is applied to it first.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace ft::ops {

struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.f;
  int64_t step = 1;        // the number of this update, counting from 1 (bias correction)
  float grad_scale = 1.f;  // multiplies every gradient before anything else
  Tensor grad_norm;        // optional f32 one-element tensor on the params' device (ops::grad_norm)
  float max_grad_norm = 0.f;  // > 0 clips by grad_norm (which must then be given)
};

// Updates params, m and v in place. params, grads, m, v: contiguous f32 with equal numel on one
// device (shapes may differ: flat views of an arena are typical). working_copy: optional
// contiguous bf16/f16 tensor with the same numel, rewritten from the updated params in the same
// pass.
void adamw_step(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const AdamWOptions& opts, const Tensor& working_copy = Tensor());

}  // namespace ft::ops
