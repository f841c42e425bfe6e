#include "ops/softmax.h"

#include "ops/cpu/softmax.h"
#include "ops/cuda/softmax.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

int64_t check_rows(const char* op, const Tensor& x) {
  FT_CHECK_ARG(x.dim() >= 1 && x.size(-1) > 0, "[", op, "] needs a non-empty last axis, got shape ", x.shape());
  FT_CHECK_ARG(is_floating(x.dtype()), "[", op, "] needs a floating dtype, got ", x.dtype());
  FT_CHECK_ARG(!(x.is_cuda() && x.dtype() == DType::F64), "[", op, "] f64 is CPU-only, tensor is on ", x.device());
  return x.size(-1);
}

}  // namespace

Tensor softmax_forward(const Tensor& x0) {
  const int64_t C = check_rows("softmax", x0);
  const Tensor x = x0.contiguous();
  const int64_t rows = x.numel() / C;
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // (..., C)
  if (rows == 0) return y;
  dispatch(
      x.device(),
      [&] {
        run_cpu_widened("softmax", x, y, [&](const auto* xp, auto* yp) { cpu::softmax_forward(xp, yp, rows, C); });
      },
      [&](Stream s) {
        cuda::SoftmaxParams p;
        p.x = x.data_ptr();
        p.out = y.data_ptr();
        p.rows = rows;
        p.cols = C;
        p.dtype = x.dtype();
        cuda::softmax_forward(p, s);
      });
  return y;
}

Tensor softmax_backward(const Tensor& dy0, const Tensor& y0) {
  const int64_t C = check_rows("softmax_backward", y0);
  FT_CHECK_ARG(dy0.shape() == y0.shape() && dy0.dtype() == y0.dtype() && dy0.device() == y0.device(),
               "[softmax_backward] dy ", dy0.shape(), " ", dy0.dtype(), " on ", dy0.device(), " does not match y ",
               y0.shape(), " ", y0.dtype(), " on ", y0.device());
  const Tensor dy = dy0.contiguous(), y = y0.contiguous();
  const int64_t rows = y.numel() / C;
  Tensor dx = Tensor::empty(y.shape(), y.dtype(), y.device());  // (..., C)
  if (rows == 0) return dx;
  dispatch(
      y.device(),
      [&] {
        const Tensor yf = widen_half(y), dyf = widen_half(dy);
        WideOutput dxf(dx);
        dispatch_cpu_float(yf.dtype(), "softmax_backward", [&](auto tag) {
          using T = decltype(tag);
          cpu::softmax_backward<T>(yf.data<T>(), dyf.data<T>(), dxf.tensor().data<T>(), rows, C);
        });
        dxf.round_into_output();
      },
      [&](Stream s) {
        cuda::SoftmaxParams p;
        p.y = y.data_ptr();
        p.dy = dy.data_ptr();
        p.out = dx.data_ptr();
        p.rows = rows;
        p.cols = C;
        p.dtype = y.dtype();
        cuda::softmax_backward(p, s);
      });
  return dx;
}

}  // namespace ft::ops
