#include "ops/dropout.h"

#include <limits>

#include "core/dropout_mask.h"
#include "ops/cpu/dropout.h"
#include "ops/cuda/dropout.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

Tensor apply(const char* op, const Tensor& x0, float p, PhiloxState state) {
  FT_CHECK_ARG(x0.defined(), "[", op, "] the input is undefined");
  FT_CHECK_ARG(is_floating(x0.dtype()), "[", op, "] needs a floating dtype, got ", x0.dtype(), " for ", x0.shape());
  FT_CHECK_ARG(p >= 0.f && p <= 1.f, "[", op, "] p must be in [0, 1], got ", p);
  const Tensor x = x0.contiguous();
  const int64_t cols = x.dim() == 0 ? 1 : x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  // The mask function takes 32-bit row and column-group indices.
  FT_CHECK_ARG(rows <= std::numeric_limits<uint32_t>::max(), "[", op, "] ", rows, " rows in x ", x.shape(),
               " exceed the mask's 32-bit row index");
  const DropoutParams mask = make_dropout_params(state, p);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (y.numel() == 0) return y;
  dispatch(
      x.device(),
      [&] {
        run_cpu_widened(op, x, y, [&](const auto* xp, auto* yp) { cpu::dropout(xp, yp, rows, cols, mask); });
      },
      [&](Stream s) {
        cuda::DropoutKernelParams kp;
        kp.x = x.data_ptr();
        kp.y = y.data_ptr();
        kp.dtype = x.dtype();
        kp.rows = rows;
        kp.cols = cols;
        kp.mask = mask;
        cuda::dropout(kp, s);
      });
  return y;
}

}  // namespace

Tensor dropout(const Tensor& x, float p, PhiloxState state) { return apply("dropout", x, p, state); }

// The backward is the forward applied to dy: the same mask, the same 1 / (1 - p).
Tensor dropout_backward(const Tensor& dy, float p, PhiloxState state) {
  return apply("dropout_backward", dy, p, state);
}

}  // namespace ft::ops
