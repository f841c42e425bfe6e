#include "ops/relu.h"

#include "ops/cpu/relu.h"
#include "ops/cuda/relu.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

// CPU kernels take f32/f64: half tensors are widened here and narrowed back (exactly: relu only
// selects values).
Tensor widen(const Tensor& t) { return is_half(t.dtype()) ? cast(t, DType::F32) : t; }

void check_x(const char* op, const Tensor& x) {
  FT_CHECK_ARG(is_floating(x.dtype()), "[", op, "] x must be floating point, got ", x.dtype());
  FT_CHECK_ARG(!(x.is_cuda() && x.dtype() == DType::F64), "[", op, "] f64 is CPU-only, x is on ", x.device());
}

}  // namespace

Tensor relu_forward(const Tensor& x0) {
  check_x("relu", x0);
  const Tensor x = x0.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // x's shape
  if (x.numel() == 0) return y;
  dispatch(
      x.device(),
      [&] {
        const Tensor xf = widen(x);
        Tensor yf = is_half(x.dtype()) ? Tensor::empty(x.shape(), DType::F32) : y;
        dispatch_cpu_float(xf.dtype(), "relu", [&](auto tag) {
          using T = decltype(tag);
          cpu::relu_forward<T>(xf.data<T>(), yf.data<T>(), x.numel());
        });
        if (!yf.is_same(y)) y.copy_(cast(yf, x.dtype()));
      },
      [&](Stream s) {
        cuda::ReluParams p;
        p.x = x.data_ptr();
        p.out = y.data_ptr();
        p.n = x.numel();
        p.dtype = x.dtype();
        cuda::relu_forward(p, s);
      });
  return y;
}

Tensor relu_backward(const Tensor& dy0, const Tensor& x0) {
  check_x("relu_backward", x0);
  FT_CHECK_ARG(dy0.shape() == x0.shape() && dy0.dtype() == x0.dtype() && dy0.device() == x0.device(),
               "[relu_backward] dy ", dy0.shape(), " ", dy0.dtype(), " on ", dy0.device(), " does not match x ",
               x0.shape(), " ", x0.dtype(), " on ", x0.device());
  const Tensor dy = dy0.contiguous(), x = x0.contiguous();
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());  // x's shape
  if (x.numel() == 0) return dx;
  dispatch(
      x.device(),
      [&] {
        const Tensor dyf = widen(dy), xf = widen(x);
        Tensor dxf = is_half(x.dtype()) ? Tensor::empty(x.shape(), DType::F32) : dx;
        dispatch_cpu_float(xf.dtype(), "relu_backward", [&](auto tag) {
          using T = decltype(tag);
          cpu::relu_backward<T>(dyf.data<T>(), xf.data<T>(), dxf.data<T>(), x.numel());
        });
        if (!dxf.is_same(dx)) dx.copy_(cast(dxf, x.dtype()));
      },
      [&](Stream s) {
        cuda::ReluParams p;
        p.x = x.data_ptr();
        p.dy = dy.data_ptr();
        p.out = dx.data_ptr();
        p.n = x.numel();
        p.dtype = x.dtype();
        cuda::relu_backward(p, s);
      });
  return dx;
}

}  // namespace ft::ops
