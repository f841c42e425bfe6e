#include "ops/layernorm.h"

#include "ops/cpu/layernorm.h"
#include "ops/cuda/layernorm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

// Statistics and parameter gradients: fp32, or f64 when the whole computation is f64.
DType stat_dtype(DType x) { return x == DType::F64 ? DType::F64 : DType::F32; }

// The checks both directions share: x (..., C) floating, weight (C) of x's dtype (or f32 under
// halves), one device.
int64_t check_x_and_weight(const char* op, const Tensor& x, const Tensor& weight) {
  FT_CHECK_ARG(x.dim() >= 1 && x.size(-1) > 0, "[", op, "] x needs a non-empty last axis, got shape ", x.shape());
  FT_CHECK_ARG(is_floating(x.dtype()), "[", op, "] x must be floating point, got ", x.dtype());
  FT_CHECK_ARG(!(x.is_cuda() && x.dtype() == DType::F64), "[", op, "] f64 is CPU-only, x is on ", x.device());
  const int64_t C = x.size(-1);
  FT_CHECK_ARG(weight.dim() == 1 && weight.size(0) == C, "[", op, "] weight ", weight.shape(),
               " does not match x ", x.shape(), " (expected (", C, ",))");
  FT_CHECK_ARG(layernorm_params_fit(weight.dtype(), x.dtype()), "[", op, "] weight is ", weight.dtype(), " but x is ",
               x.dtype(), " (pass the parameters in the activation dtype, or f32 under bf16 / f16)");
  FT_CHECK_ARG(weight.device() == x.device(), "[", op, "] weight is on ", weight.device(), " but x is on ", x.device());
  return C;
}

Shape row_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

}  // namespace

LayerNormOut layernorm_forward(const Tensor& x0, const Tensor& weight0, const Tensor& bias0, double eps) {
  const int64_t C = check_x_and_weight("layernorm", x0, weight0);
  FT_CHECK_ARG(bias0.dim() == 1 && bias0.size(0) == C && bias0.dtype() == weight0.dtype() &&
                   bias0.device() == x0.device(),
               "[layernorm] bias ", bias0.shape(), " ", bias0.dtype(), " on ", bias0.device(),
               " does not match weight ", weight0.shape(), " ", weight0.dtype(), " on ", weight0.device());
  FT_CHECK_ARG(eps >= 0, "[layernorm] eps must be >= 0, got ", eps);
  const Tensor x = x0.contiguous(), weight = weight0.contiguous(), bias = bias0.contiguous();
  const Device dev = x.device();
  const int64_t rows = x.numel() / C;
  LayerNormOut out{Tensor::empty(x.shape(), x.dtype(), dev), Tensor::empty(row_shape(x), stat_dtype(x.dtype()), dev),
                   Tensor::empty(row_shape(x), stat_dtype(x.dtype()), dev)};
  if (rows == 0) return out;
  dispatch(
      dev,
      [&] {
        const Tensor xf = widen_half(x), wf = widen_half(weight), bf = widen_half(bias);
        WideOutput yf(out.y);
        dispatch_cpu_float(xf.dtype(), "layernorm", [&](auto tag) {
          using T = decltype(tag);
          cpu::layernorm_forward<T>(xf.data<T>(), wf.data<T>(), bf.data<T>(), yf.tensor().data<T>(), out.mean.data<T>(),
                                    out.rstd.data<T>(), rows, C, eps);
        });
        yf.round_into_output();
      },
      [&](Stream s) {
        cuda::LayerNormForwardParams p;
        p.x = x.data_ptr();
        p.weight = weight.data_ptr();
        p.bias = bias.data_ptr();
        p.y = out.y.data_ptr();
        p.mean = out.mean.data<float>();
        p.rstd = out.rstd.data<float>();
        p.rows = rows;
        p.cols = C;
        p.eps = static_cast<float>(eps);
        p.dtype = x.dtype();
        p.param_dtype = weight.dtype();
        cuda::layernorm_forward(p, s);
      });
  return out;
}

bool layernorm_params_fit(DType param, DType x) {
  return param == x || (param == DType::F32 && (x == DType::BF16 || x == DType::F16));
}

void check_param_sinks(const char* op, const LayerNormParamSinks& into, int64_t C, DType x_dtype, Device dev) {
  for (const Tensor* t : {&into.dweight, &into.dbias}) {
    if (!t->defined()) continue;
    FT_CHECK_ARG(x_dtype != DType::F64, "[", op, "] parameter-gradient sinks are fp32; f64 x returns its own f64 sums");
    FT_CHECK_ARG(t->dtype() == DType::F32 && t->numel() == C && t->is_contiguous() && t->device() == dev, "[", op,
                 "] a parameter-gradient sink must be a contiguous f32 tensor of ", C, " elements on ", dev, ", got ",
                 t->shape(), " ", t->dtype(), " on ", t->device());
  }
}

void add_into_param_sinks(const LayerNormParamSinks& into, Tensor& dweight, Tensor& dbias) {
  if (into.dweight.defined()) {
    add_(into.dweight, dweight.view(into.dweight.shape()));
    dweight = into.dweight;
  }
  if (into.dbias.defined()) {
    add_(into.dbias, dbias.view(into.dbias.shape()));
    dbias = into.dbias;
  }
}

LayerNormGrads layernorm_backward(const Tensor& dy0, const Tensor& x0, const Tensor& weight0, const Tensor& mean0,
                                  const Tensor& rstd0, const LayerNormParamSinks& into) {
  const int64_t C = check_x_and_weight("layernorm_backward", x0, weight0);
  FT_CHECK_ARG(dy0.shape() == x0.shape() && dy0.dtype() == x0.dtype() && dy0.device() == x0.device(),
               "[layernorm_backward] dy ", dy0.shape(), " ", dy0.dtype(), " on ", dy0.device(), " does not match x ",
               x0.shape(), " ", x0.dtype(), " on ", x0.device());
  const int64_t rows = x0.numel() / C;
  const DType sd = stat_dtype(x0.dtype());
  for (const Tensor* t : {&mean0, &rstd0}) {
    FT_CHECK_ARG(t->numel() == rows && t->dtype() == sd && t->device() == x0.device(),
                 "[layernorm_backward] mean/rstd must hold one ", sd, " per row of x ", x0.shape(), " on ",
                 x0.device(), ", got ", t->shape(), " ", t->dtype(), " on ", t->device());
  }
  const Tensor dy = dy0.contiguous(), x = x0.contiguous(), weight = weight0.contiguous();
  const Tensor mean = mean0.contiguous(), rstd = rstd0.contiguous();
  const Device dev = x.device();
  check_param_sinks("layernorm_backward", into, C, x.dtype(), dev);
  LayerNormGrads g{Tensor::empty(x.shape(), x.dtype(), dev), Tensor::empty({C}, sd, dev), Tensor::empty({C}, sd, dev)};
  dispatch(
      dev,
      [&] {
        const Tensor dyf = widen_half(dy), xf = widen_half(x), wf = widen_half(weight);
        WideOutput dxf(g.dx);
        dispatch_cpu_float(xf.dtype(), "layernorm_backward", [&](auto tag) {
          using T = decltype(tag);
          cpu::layernorm_backward<T>(dyf.data<T>(), xf.data<T>(), wf.data<T>(), mean.data<T>(), rstd.data<T>(),
                                     dxf.tensor().data<T>(), g.dweight.data<T>(), g.dbias.data<T>(), rows, C);
        });
        dxf.round_into_output();
        add_into_param_sinks(into, g.dweight, g.dbias);
      },
      [&](Stream s) {
        if (into.dweight.defined()) g.dweight = into.dweight;
        if (into.dbias.defined()) g.dbias = into.dbias;
        cuda::LayerNormBackwardParams p;
        p.dy = dy.data_ptr();
        p.x = x.data_ptr();
        p.weight = weight.data_ptr();
        p.mean = mean.data<float>();
        p.rstd = rstd.data<float>();
        p.dx = g.dx.data_ptr();
        p.dweight = g.dweight.data<float>();
        p.dbias = g.dbias.data<float>();
        p.add_dweight = into.dweight.defined();
        p.add_dbias = into.dbias.defined();
        p.rows = rows;
        p.cols = C;
        p.dtype = x.dtype();
        p.param_dtype = weight.dtype();
        p.device = dev.index;
        cuda::layernorm_backward(p, s);
      });
  return g;
}

}  // namespace ft::ops
