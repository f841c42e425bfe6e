// The residual add fused with the LayerNorm that follows it (llm.c's fused_residual_forward, with
// our dropout on the branch):
//
//   y = x + dropout(h)       the new residual stream, x's dtype
//   z = LayerNorm(y)         x's dtype; mean, rstd of y's rows in fp32 (f64 for f64 x)
//
// x (the residual stream) and h (a branch output) are (..., C); weight and bias (C) in x's dtype.
// Rows and columns of the mask are those of h viewed as (N, C), so the mask is exactly the one
// ops::dropout(h, p, state) draws, and the call consumes the same kDropoutOffsets offsets of the
// generator. Rounding follows the unfused ops step by step: dropout(h) is rounded to x's dtype
// before the add, y is rounded before it is normalised, so
//   y == ops::add(x, ops::dropout(h, p, state))   bitwise, every dtype and device;
//   z == ops::layernorm_forward(y, ...).y          bitwise on CUDA for bf16/f16 rows taking the
//                                                  vector path (same row code), within rounding
//                                                  otherwise.
// p = 0 adds h unchanged and draws nothing from `state`.
//
// h_bias (C) in x's dtype, optional: the branch's bias, which the layer producing h left out
// (nn::Block's output projections), added here: h is replaced by h + h_bias rounded to x's dtype,
// ops::add(h, h_bias), before everything above. Its gradient is the column sums of dh, which the
// backward takes on the way instead of a separate pass over dh (the bias gradient of the
// projection: 2 x 25 MB a layer of GPT-2 small at B T = 16384).
//
// Backward: given gy (the gradient reaching y from later layers; undefined means zero) and gz,
//   dy = gy + LayerNormBackward(gz)    the LayerNorm part rounded to x's dtype before the add, as
//                                      the autograd engine's sum of the two contributions would be
//   dx = dy (the same tensor), dh = dropout_backward(dy) with the forward's mask,
//   dweight, dbias: sums over all rows in fp32 (f64 for f64 x), like ops::layernorm_backward
//   (two-stage on CUDA, no atomics: bitwise reproducible on the same card);
//   dh_bias (asked for with h_bias_grad): dh's rows summed the same way, dh as stored (rounded).
// With p = 0, dh is the same tensor as dy.
#pragma once

#include "core/philox.h"
#include "core/tensor.h"
#include "ops/layernorm.h"

namespace ft::ops {

struct ResidualLayerNormOut {
  Tensor y;     // (..., C), x's dtype: x + dropout(h)
  Tensor z;     // (..., C), x's dtype: LayerNorm(y)
  Tensor mean;  // (...), fp32 (f64 for f64 x), of y's rows
  Tensor rstd;  // (...), 1 / sqrt(var + eps), biased variance
};

ResidualLayerNormOut residual_layernorm_forward(const Tensor& x, const Tensor& h, const Tensor& weight,
                                                const Tensor& bias, double eps, float p, PhiloxState state,
                                                const Tensor& h_bias = Tensor());

struct ResidualLayerNormGrads {
  Tensor dy;       // (..., C), x's dtype: the gradient of x (and of y's consumers' sum)
  Tensor dh;       // (..., C), x's dtype; the same tensor as dy when p = 0
  Tensor dweight;  // (C), fp32 (f64 for f64 x)
  Tensor dbias;    // (C), fp32 (f64 for f64 x)
  Tensor dh_bias;  // (C), fp32 (f64 for f64 x): dh's column sums; undefined unless asked for
};

// gy (may be undefined) and gz (..., C) in y's dtype; y, mean and rstd as the forward returned
// them; p and state those of the forward call. `into`: as ops::layernorm_backward's (the sums added
// into those fp32 tensors, which g.dweight / g.dbias then are). h_bias_grad: also dh's column sums,
// added into dh_bias_into when that is given (a contiguous fp32 (C) tensor on y's device, not for
// f64 y), which g.dh_bias then is.
ResidualLayerNormGrads residual_layernorm_backward(const Tensor& gy, const Tensor& gz, const Tensor& y,
                                                   const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                                   float p, PhiloxState state, const LayerNormParamSinks& into = {},
                                                   bool h_bias_grad = false, const Tensor& dh_bias_into = Tensor());

}  // namespace ft::ops
