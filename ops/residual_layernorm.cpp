#include "ops/residual_layernorm.h"

#include <limits>

#include "core/dropout_mask.h"
#include "ops/cpu/residual_layernorm.h"
#include "ops/cuda/residual_layernorm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/layernorm.h"
#include "ops/reduce.h"

namespace ft::ops {
namespace {

DType stat_dtype(DType x) { return x == DType::F64 ? DType::F64 : DType::F32; }

Shape row_shape(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 1); }

// `t` (named `what`) has the shape, dtype and device of `like` (named `like_name`).
void check_like(const char* op, const char* what, const Tensor& t, const char* like_name, const Tensor& like) {
  FT_CHECK_ARG(t.defined(), "[", op, "] ", what, " is undefined");
  FT_CHECK_ARG(t.shape() == like.shape() && t.dtype() == like.dtype() && t.device() == like.device(), "[", op, "] ",
               what, " ", t.shape(), " ", t.dtype(), " on ", t.device(), " does not match ", like_name, " ",
               like.shape(), " ", like.dtype(), " on ", like.device());
}

// The checks both directions share: a (..., C) floating, a parameter (C) on its device in its dtype
// (or f32 under halves: ops::layernorm_params_fit),
// rows within the mask's 32-bit row index, p in [0, 1]. Returns C.
int64_t check_rows_and_param(const char* op, const Tensor& a, const Tensor& param, const char* param_name, float p) {
  FT_CHECK_ARG(a.defined() && a.dim() >= 1 && a.size(-1) > 0, "[", op, "] inputs need a non-empty last axis, got ",
               a.defined() ? str(a.shape()) : std::string("undefined"));
  FT_CHECK_ARG(is_floating(a.dtype()), "[", op, "] inputs must be floating point, got ", a.dtype());
  FT_CHECK_ARG(!(a.is_cuda() && a.dtype() == DType::F64), "[", op, "] f64 is CPU-only, inputs are on ", a.device());
  const int64_t C = a.size(-1);
  FT_CHECK_ARG(param.defined() && param.dim() == 1 && param.size(0) == C &&
                   layernorm_params_fit(param.dtype(), a.dtype()) && param.device() == a.device(),
               "[", op, "] ", param_name, " ", param.defined() ? str(param.shape(), " ", param.dtype()) : "undefined",
               " does not match inputs ", a.shape(), " ", a.dtype(), " on ", a.device(), " (expected (", C,
               ",) in the activation dtype, or f32 under bf16 / f16)");
  FT_CHECK_ARG(a.numel() / C <= std::numeric_limits<uint32_t>::max(), "[", op, "] ", a.numel() / C, " rows in ",
               a.shape(), " exceed the mask's 32-bit row index");
  FT_CHECK_ARG(p >= 0.f && p <= 1.f, "[", op, "] p must be in [0, 1], got ", p);
  return C;
}

}  // namespace

ResidualLayerNormOut residual_layernorm_forward(const Tensor& x0, const Tensor& h0, const Tensor& weight0,
                                                const Tensor& bias0, double eps, float p, PhiloxState state,
                                                const Tensor& h_bias0) {
  const char* op = "residual_layernorm";
  const int64_t C = check_rows_and_param(op, x0, weight0, "weight", p);
  check_rows_and_param(op, x0, bias0, "bias", p);
  FT_CHECK_ARG(bias0.dtype() == weight0.dtype(), "[", op, "] bias is ", bias0.dtype(), " but weight is ",
               weight0.dtype(), " (the parameters share a dtype)");
  check_like(op, "h", h0, "x", x0);
  if (h_bias0.defined()) {
    FT_CHECK_ARG(h_bias0.dim() == 1 && h_bias0.size(0) == C && h_bias0.dtype() == x0.dtype() &&
                     h_bias0.device() == x0.device(),
                 "[", op, "] h_bias ", h_bias0.shape(), " ", h_bias0.dtype(), " on ", h_bias0.device(),
                 " does not match x ", x0.shape(), " ", x0.dtype(), " on ", x0.device(), " (expected (", C,
                 ",) in x's dtype)");
  }
  FT_CHECK_ARG(eps >= 0, "[", op, "] eps must be >= 0, got ", eps);
  const Tensor x = x0.contiguous(), weight = weight0.contiguous(), bias = bias0.contiguous();
  const Tensor h_bias = h_bias0.defined() ? h_bias0.contiguous() : Tensor();
  // The CPU reference adds the bias as the unfused op does; the CUDA kernels fuse that add.
  const Tensor h = h_bias.defined() && !x.is_cuda() ? add(h0, h_bias) : h0.contiguous();
  const Device dev = x.device();
  const int64_t rows = x.numel() / C;
  const DType sd = stat_dtype(x.dtype());
  ResidualLayerNormOut out{Tensor::empty(x.shape(), x.dtype(), dev), Tensor::empty(x.shape(), x.dtype(), dev),
                           Tensor::empty(row_shape(x), sd, dev), Tensor::empty(row_shape(x), sd, dev)};
  if (rows == 0) return out;
  const DropoutParams mask = make_dropout_params(state, p);
  // A threshold of 0 keeps everything: ops::dropout's CUDA path copies h then, unscaled.
  const bool dropout = mask.threshold != 0;
  dispatch(
      dev,
      [&] {
        const Tensor xf = widen_half(x), hf = widen_half(h), wf = widen_half(weight), bf = widen_half(bias);
        WideOutput yf(out.y), zf(out.z);
        dispatch_cpu_float(xf.dtype(), op, [&](auto tag) {
          using T = decltype(tag);
          cpu::residual_layernorm_forward<T>(xf.data<T>(), hf.data<T>(), wf.data<T>(), bf.data<T>(),
                                             yf.tensor().data<T>(), zf.tensor().data<T>(), out.mean.data<T>(),
                                             out.rstd.data<T>(), rows, C, eps, mask, dropout, x.dtype());
        });
        yf.round_into_output();
        zf.round_into_output();
      },
      [&](Stream s) {
        cuda::ResidualLayerNormForwardParams kp;
        kp.x = x.data_ptr();
        kp.h = h.data_ptr();
        kp.h_bias = h_bias.defined() ? h_bias.data_ptr() : nullptr;
        kp.weight = weight.data_ptr();
        kp.bias = bias.data_ptr();
        kp.y = out.y.data_ptr();
        kp.z = out.z.data_ptr();
        kp.mean = out.mean.data<float>();
        kp.rstd = out.rstd.data<float>();
        kp.rows = rows;
        kp.cols = C;
        kp.eps = static_cast<float>(eps);
        kp.dtype = x.dtype();
        kp.param_dtype = weight.dtype();
        kp.dropout = dropout;
        kp.mask = mask;
        cuda::residual_layernorm_forward(kp, s);
      });
  return out;
}

ResidualLayerNormGrads residual_layernorm_backward(const Tensor& gy0, const Tensor& gz0, const Tensor& y0,
                                                   const Tensor& weight0, const Tensor& mean0, const Tensor& rstd0,
                                                   float p, PhiloxState state, const LayerNormParamSinks& into,
                                                   bool h_bias_grad, const Tensor& dh_bias_into) {
  const char* op = "residual_layernorm_backward";
  const int64_t C = check_rows_and_param(op, y0, weight0, "weight", p);
  check_like(op, "gz", gz0, "y", y0);
  if (gy0.defined()) check_like(op, "gy", gy0, "y", y0);
  const int64_t rows = y0.numel() / C;
  const DType sd = stat_dtype(y0.dtype());
  for (const Tensor* t : {&mean0, &rstd0}) {
    FT_CHECK_ARG(t->defined() && t->numel() == rows && t->dtype() == sd && t->device() == y0.device(), "[", op,
                 "] mean/rstd must hold one ", sd, " per row of y ", y0.shape(), " on ", y0.device());
  }
  const Tensor gz = gz0.contiguous(), y = y0.contiguous(), weight = weight0.contiguous();
  const Tensor gy = gy0.defined() ? gy0.contiguous() : Tensor();
  const Tensor mean = mean0.contiguous(), rstd = rstd0.contiguous();
  const Device dev = y.device();
  check_param_sinks(op, into, C, y.dtype(), dev);
  if (dh_bias_into.defined()) {
    FT_CHECK_ARG(h_bias_grad, "[", op, "] dh_bias_into is given but h_bias_grad is false");
    check_param_sinks(op, LayerNormParamSinks{dh_bias_into, Tensor()}, C, y.dtype(), dev);
  }
  const DropoutParams mask = make_dropout_params(state, p);
  const bool dropout = mask.threshold != 0;
  ResidualLayerNormGrads g{Tensor::empty(y.shape(), y.dtype(), dev), Tensor(), Tensor::empty({C}, sd, dev),
                           Tensor::empty({C}, sd, dev), Tensor()};
  g.dh = dropout ? Tensor::empty(y.shape(), y.dtype(), dev) : g.dy;
  dispatch(
      dev,
      [&] {
        const Tensor gzf = widen_half(gz), yf = widen_half(y), wf = widen_half(weight);
        const Tensor gyf = gy.defined() ? widen_half(gy) : Tensor();
        WideOutput dyf(g.dy), dhf(g.dh);
        dispatch_cpu_float(yf.dtype(), op, [&](auto tag) {
          using T = decltype(tag);
          cpu::residual_layernorm_backward<T>(gyf.defined() ? gyf.data<T>() : nullptr, gzf.data<T>(), yf.data<T>(),
                                              wf.data<T>(), mean.data<T>(), rstd.data<T>(), dyf.tensor().data<T>(),
                                              dropout ? dhf.tensor().data<T>() : nullptr, g.dweight.data<T>(),
                                              g.dbias.data<T>(), rows, C, mask, dropout, y.dtype());
        });
        dyf.round_into_output();
        if (dropout) dhf.round_into_output();
        add_into_param_sinks(into, g.dweight, g.dbias);
        if (h_bias_grad) {  // dh as stored, its rows summed in fp32 (f64 for f64)
          g.dh_bias = sum(widen_half(g.dh).view({rows, C}), 0);
          if (dh_bias_into.defined()) {
            add_(dh_bias_into, g.dh_bias);
            g.dh_bias = dh_bias_into;
          }
        }
      },
      [&](Stream s) {
        if (into.dweight.defined()) g.dweight = into.dweight;
        if (into.dbias.defined()) g.dbias = into.dbias;
        if (h_bias_grad) g.dh_bias = dh_bias_into.defined() ? dh_bias_into : Tensor::zeros({C}, sd, dev);
        cuda::ResidualLayerNormBackwardParams kp;
        kp.gy = gy.defined() ? gy.data_ptr() : nullptr;
        kp.gz = gz.data_ptr();
        kp.y = y.data_ptr();
        kp.weight = weight.data_ptr();
        kp.mean = mean.data<float>();
        kp.rstd = rstd.data<float>();
        kp.dy = g.dy.data_ptr();
        kp.dh = dropout ? g.dh.data_ptr() : nullptr;
        kp.dweight = g.dweight.data<float>();
        kp.dbias = g.dbias.data<float>();
        kp.dh_bias = h_bias_grad ? g.dh_bias.data<float>() : nullptr;
        kp.add_dweight = into.dweight.defined();
        kp.add_dbias = into.dbias.defined();
        kp.rows = rows;
        kp.cols = C;
        kp.dtype = y.dtype();
        kp.param_dtype = weight.dtype();
        kp.dropout = dropout;
        kp.mask = mask;
        kp.device = dev.index;
        cuda::residual_layernorm_backward(kp, s);
      });
  return g;
}

}  // namespace ft::ops
