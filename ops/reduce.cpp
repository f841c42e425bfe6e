#include "ops/reduce.h"

#include <limits>

#include "ops/cpu/reduce.h"
#include "ops/cuda/reduce.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

// x's shape seen as (outer, r, inner) around `axis`.
struct Split3 {
  int64_t outer = 1, r = 1, inner = 1;
};

Split3 split_at(const Shape& shape, int axis) {
  Split3 s;
  for (int i = 0; i < axis; ++i) s.outer *= shape[i];
  s.r = shape[axis];
  for (size_t i = axis + 1; i < shape.size(); ++i) s.inner *= shape[i];
  return s;
}

Shape reduced_shape(const Shape& shape, int axis, bool keepdim) {
  Shape out = shape;
  if (keepdim) out[axis] = 1;
  else out.erase(out.begin() + axis);
  return out;
}

Tensor reduce(const char* op, const Tensor& x0, int axis0, bool keepdim, bool is_mean) {
  FT_CHECK_ARG(x0.defined(), "[", op, "] the input is undefined");
  FT_CHECK_ARG(is_floating(x0.dtype()), "[", op, "] needs a floating dtype, got ", x0.dtype(), " for x ",
               x0.shape());
  FT_CHECK_ARG(x0.dim() >= 1, "[", op, "] cannot reduce a 0-d tensor");
  const int axis = normalize_axis(axis0, x0.dim(), op);
  const Tensor x = x0.contiguous();
  const Split3 s = split_at(x.shape(), axis);
  // mean over an empty axis is 0/0, as in NumPy and PyTorch.
  const double scale = !is_mean ? 1.0 : s.r > 0 ? 1.0 / static_cast<double>(s.r)
                                                : std::numeric_limits<double>::quiet_NaN();
  Tensor y = Tensor::empty(reduced_shape(x.shape(), axis, keepdim), x.dtype(), x.device());
  if (y.numel() == 0) return y;
  dispatch(
      x.device(),
      [&] {
        run_cpu_widened(op, x, y, [&](const auto* xp, auto* yp) { cpu::reduce_sum(xp, yp, s.outer, s.r, s.inner, scale); });
      },
      [&](Stream stream) {
        cuda::ReduceParams p;
        p.x = x.data_ptr();
        p.y = y.data_ptr();
        p.dtype = x.dtype();
        p.outer = s.outer;
        p.r = s.r;
        p.inner = s.inner;
        p.scale = static_cast<float>(scale);
        Tensor partial;  // kept alive until the launch is queued; stream order protects its reuse
        if (s.inner > 1) {
          p.splits = cuda::reduce_column_splits(s.outer, s.r, s.inner);
          if (p.splits > 1) {
            partial = Tensor::empty({p.splits, s.outer, s.inner}, DType::F32, x.device());
            p.partial = partial.data<float>();
          }
        }
        cuda::reduce_sum(p, stream);
      });
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, int axis, bool keepdim) { return reduce("sum", x, axis, keepdim, false); }
Tensor mean(const Tensor& x, int axis, bool keepdim) { return reduce("mean", x, axis, keepdim, true); }

Tensor reduce_backward(const Tensor& dy0, const Shape& x_shape, int axis0, double scale) {
  FT_CHECK_ARG(dy0.defined(), "[reduce_backward] dy is undefined");
  FT_CHECK_ARG(is_floating(dy0.dtype()), "[reduce_backward] needs a floating dtype, got ", dy0.dtype());
  FT_CHECK_ARG(!x_shape.empty(), "[reduce_backward] x_shape is 0-d");
  const int axis = normalize_axis(axis0, static_cast<int>(x_shape.size()), "reduce_backward");
  const Split3 s = split_at(x_shape, axis);
  FT_CHECK_ARG(dy0.numel() == s.outer * s.inner && (dy0.shape() == reduced_shape(x_shape, axis, true) ||
                                                    dy0.shape() == reduced_shape(x_shape, axis, false)),
               "[reduce_backward] dy ", dy0.shape(), " is not x ", x_shape, " reduced over axis ", axis);
  const Tensor dy = dy0.contiguous();
  Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
  if (dx.numel() == 0) return dx;
  dispatch(
      dy.device(),
      [&] {
        const Tensor dyf = widen_half(dy);
        WideOutput dxf(dx);
        dispatch_cpu_float(dyf.dtype(), "reduce_backward", [&](auto tag) {
          using T = decltype(tag);
          cpu::reduce_backward<T>(dyf.data<T>(), dxf.tensor().data<T>(), s.outer, s.r, s.inner, scale);
        });
        dxf.round_into_output();
      },
      [&](Stream stream) {
        cuda::ReduceBackwardParams p;
        p.dy = dy.data_ptr();
        p.dx = dx.data_ptr();
        p.dtype = dy.dtype();
        p.outer = s.outer;
        p.r = s.r;
        p.inner = s.inner;
        p.scale = static_cast<float>(scale);
        cuda::reduce_backward(p, stream);
      });
  return dx;
}

void sum_rows_into(const Tensor& x, const Tensor& out) {
  FT_CHECK_ARG(x.defined() && out.defined(), "[sum_rows_into] x and out must be defined");
  FT_CHECK_ARG(is_floating(x.dtype()) && x.dim() >= 1, "[sum_rows_into] x must be a floating tensor, got ", x);
  const int64_t C = x.size(-1);
  const DType want = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  FT_CHECK_ARG(out.shape() == Shape({C}) && out.dtype() == want && out.is_contiguous() && out.device() == x.device(),
               "[sum_rows_into] out must be contiguous ", want, " (", C, ") on ", x.device(), " for x ", x.shape(),
               ", got ", out);
  FT_CHECK_ARG(x.dim() == 1 || rows_collapse(x), "[sum_rows_into] x ", x.shape(), " with strides ", x.strides(),
               " is not a stack of rows: call .contiguous() first");
  const Tensor x2 = x.dim() == 1 ? x.view({1, C}) : x.view({-1, C});  // (N, C)
  const int64_t rows = x2.size(0);
  if (rows == 0 || C == 0) return;
  dispatch(
      x.device(),
      [&] {
        const Tensor xf = widen_half(x2.contiguous());
        dispatch_cpu_float(xf.dtype(), "sum_rows_into", [&](auto tag) {
          using T = decltype(tag);
          cpu::sum_rows_into<T>(xf.data<T>(), out.data<T>(), rows, C);
        });
      },
      [&](Stream stream) {
        cuda::SumRowsIntoParams p;
        p.x = x2.data_ptr();
        p.out = out.data<float>();
        p.dtype = x.dtype();
        p.rows = rows;
        p.cols = C;
        p.row_stride = x2.stride(0);
        p.splits = cuda::sum_rows_splits(rows, C);
        const Tensor partial = Tensor::empty({p.splits, C}, DType::F32, x.device());
        p.partial = partial.data<float>();
        cuda::sum_rows_into(p, stream);
      });
}

}  // namespace ft::ops
