// The front-ends of the pointwise activations (ops/gelu.h, ops/relu.h): one validate/allocate/
// dispatch path for all of them; the CPU reference kernels (ops/cpu/gelu.cpp, relu.cpp) and the
// CUDA kernel template (ops/cuda/activation.cu) differ only in the function.
#include "ops/cpu/gelu.h"
#include "ops/cpu/relu.h"
#include "ops/cuda/activation.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/gelu.h"
#include "ops/relu.h"

namespace ft::ops {
namespace {

using Kind = cuda::ActivationKind;

void check_x(const char* op, const Tensor& x) {
  FT_CHECK_ARG(is_floating(x.dtype()), "[", op, "] x must be floating point, got ", x.dtype());
  FT_CHECK_ARG(!(x.is_cuda() && x.dtype() == DType::F64), "[", op, "] f64 is CPU-only, x is on ", x.device());
}

template <class T>
void cpu_forward(Kind kind, const T* x, T* y, int64_t n) {
  if (kind == Kind::GeluTanh) cpu::gelu_forward<T>(x, y, n);
  else cpu::relu_forward<T>(x, y, n);
}

template <class T>
void cpu_backward(Kind kind, const T* dy, const T* x, T* dx, int64_t n) {
  if (kind == Kind::GeluTanh) cpu::gelu_backward<T>(dy, x, dx, n);
  else cpu::relu_backward<T>(dy, x, dx, n);
}

Tensor activation_forward(const char* op, Kind kind, const Tensor& x0) {
  check_x(op, x0);
  const Tensor x = x0.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // x's shape
  if (x.numel() == 0) return y;
  dispatch(
      x.device(),
      [&] {
        run_cpu_widened(op, x, y, [&](const auto* xp, auto* yp) { cpu_forward(kind, xp, yp, x.numel()); });
      },
      [&](Stream s) {
        cuda::ActivationParams p;
        p.x = x.data_ptr();
        p.out = y.data_ptr();
        p.n = x.numel();
        p.dtype = x.dtype();
        p.kind = kind;
        cuda::activation_forward(p, s);
      });
  return y;
}

Tensor activation_backward(const char* op, Kind kind, const Tensor& dy0, const Tensor& x0) {
  check_x(op, x0);
  FT_CHECK_ARG(dy0.shape() == x0.shape() && dy0.dtype() == x0.dtype() && dy0.device() == x0.device(),
               "[", op, "] dy ", dy0.shape(), " ", dy0.dtype(), " on ", dy0.device(), " does not match x ",
               x0.shape(), " ", x0.dtype(), " on ", x0.device());
  const Tensor dy = dy0.contiguous(), x = x0.contiguous();
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());  // x's shape
  if (x.numel() == 0) return dx;
  dispatch(
      x.device(),
      [&] {
        const Tensor dyf = widen_half(dy), xf = widen_half(x);
        WideOutput dxf(dx);
        dispatch_cpu_float(xf.dtype(), op, [&](auto tag) {
          using T = decltype(tag);
          cpu_backward<T>(kind, dyf.data<T>(), xf.data<T>(), dxf.tensor().data<T>(), x.numel());
        });
        dxf.round_into_output();
      },
      [&](Stream s) {
        cuda::ActivationParams p;
        p.x = x.data_ptr();
        p.dy = dy.data_ptr();
        p.out = dx.data_ptr();
        p.n = x.numel();
        p.dtype = x.dtype();
        p.kind = kind;
        cuda::activation_backward(p, s);
      });
  return dx;
}

}  // namespace

Tensor gelu_forward(const Tensor& x) { return activation_forward("gelu", Kind::GeluTanh, x); }
Tensor gelu_backward(const Tensor& dy, const Tensor& x) { return activation_backward("gelu_backward", Kind::GeluTanh, dy, x); }
Tensor relu_forward(const Tensor& x) { return activation_forward("relu", Kind::Relu, x); }
Tensor relu_backward(const Tensor& dy, const Tensor& x) { return activation_backward("relu_backward", Kind::Relu, dy, x); }

}  // namespace ft::ops
