// Layernorm over the last axis, fused: forward returns what the backward needs.
//
// Dtypes: x is bf16, f16 or f32 (f64 on the CPU, for the gradient check). weight and bias are (C)
// in x's dtype (the working copy the caller already casts for the matrix products), or both f32
// under bf16 / f16 x: the fp32 parameters themselves, which keep a bf16 model's LayerNorms as
// exact as PyTorch's autocast keeps them (bench/results/hf-cross-check-h200-s38.md). mean and
// rstd are x's shape without the last axis, in fp32 (f64 for f64 x); the backward returns dweight
// and dbias in that same fp32 (f64), summed over all rows in fp32 before any rounding -- ready to
// add into the fp32 gradient arena.
//
// On CUDA the dweight/dbias sums are two-stage (per-block partials, then a fixed-order sum): no
// atomics, bitwise reproducible from run to run on the same card.
#pragma once

#include "core/tensor.h"

namespace ft::ops {

struct LayerNormOut {
  Tensor y;     // (..., C), x's dtype
  Tensor mean;  // (...), fp32 (f64 for f64 x)
  Tensor rstd;  // (...), 1 / sqrt(var + eps), biased variance
};

LayerNormOut layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

struct LayerNormGrads {
  Tensor dx;       // (..., C), x's dtype
  Tensor dweight;  // (C), fp32 (f64 for f64 x)
  Tensor dbias;    // (C), fp32 (f64 for f64 x)
};

// Where the backward adds dweight and dbias (+=) instead of returning new tensors: fp32 (C) tensors
// on x's device, either or both undefined (a new tensor then). The trainer's gradient arena: no
// rounding to the weight's dtype, no cast and add afterwards (autograd::direct_grad). Not for f64 x.
struct LayerNormParamSinks {
  Tensor dweight, dbias;
};

// dy and x (..., C); mean and rstd as returned by layernorm_forward. With sinks, g.dweight / g.dbias
// are those tensors, the sums added into them.
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, const LayerNormParamSinks& into = {});

// Whether LayerNorm parameters of dtype `param` go with x of dtype `x`: the same dtype, or f32
// under bf16 / f16.
bool layernorm_params_fit(DType param, DType x);

// The checks on `into` shared with residual_layernorm_backward (op: its name in errors).
void check_param_sinks(const char* op, const LayerNormParamSinks& into, int64_t C, DType x_dtype, Device dev);
// The CPU side of the sinks: `into`'s defined tensors += the fresh sums in g, and g then names them.
void add_into_param_sinks(const LayerNormParamSinks& into, Tensor& dweight, Tensor& dbias);

}  // namespace ft::ops
