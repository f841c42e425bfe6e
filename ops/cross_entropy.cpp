#include "ops/cross_entropy.h"

#include "ops/cpu/cross_entropy.h"
#include "ops/cuda/cross_entropy.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

DType stat_dtype(DType x) { return x == DType::F64 ? DType::F64 : DType::F32; }

// Checks logits (..., V) against targets (...) and returns the targets as contiguous int32.
Tensor checked_targets(const char* op, const Tensor& logits, const Tensor& targets) {
  FT_CHECK_ARG(logits.dim() >= 1 && logits.size(-1) > 0, "[", op, "] logits need a non-empty last (vocabulary) axis, got shape ",
               logits.shape());
  FT_CHECK_ARG(is_floating(logits.dtype()), "[", op, "] logits must be floating point, got ", logits.dtype());
  FT_CHECK_ARG(!(logits.is_cuda() && logits.dtype() == DType::F64), "[", op, "] f64 is CPU-only, logits are on ",
               logits.device());
  FT_CHECK_ARG(targets.dtype() == DType::I32 || targets.dtype() == DType::I64 || targets.dtype() == DType::U16, "[", op,
               "] targets must be i32, i64 or u16, got ", targets.dtype());
  FT_CHECK_ARG(targets.device() == logits.device(), "[", op, "] targets are on ", targets.device(), " but logits are on ",
               logits.device());
  const Shape rows(logits.shape().begin(), logits.shape().end() - 1);
  FT_CHECK_ARG(targets.shape() == rows, "[", op, "] targets ", targets.shape(), " do not match logits ", logits.shape(),
               " (expected ", rows, ")");
  return cast(targets, DType::I32).contiguous();
}

// The logits as the kernels read them: on CUDA any stack of rows (rows_collapse: contiguous, or
// padded rows as MatmulOptions::align_rows makes them) as it is, else a contiguous copy.
Tensor logits_rows(const Tensor& logits) {
  return logits.is_cuda() && rows_collapse(logits) ? logits : logits.contiguous();
}
int64_t row_stride(const Tensor& logits) { return logits.dim() >= 2 ? logits.stride(-2) : logits.size(-1); }

void check_target_range(const Tensor& targets, int64_t vocab, int32_t ignore_index) {
  const int32_t* t = targets.data<int32_t>();
  for (int64_t i = 0; i < targets.numel(); ++i) {
    FT_CHECK_ARG(t[i] == ignore_index || (t[i] >= 0 && t[i] < vocab), "[cross_entropy] target ", t[i], " at row ", i,
                 " is outside [0, ", vocab, ") and is not ignore_index ", ignore_index);
  }
}

}  // namespace

CrossEntropyOut cross_entropy_forward(const Tensor& logits0, const Tensor& targets0, int32_t ignore_index) {
  const Tensor targets = checked_targets("cross_entropy", logits0, targets0);  // (N)
  const Tensor logits = logits_rows(logits0);                                   // (N, V)
  const int64_t V = logits.size(-1), rows = targets.numel();
  const Device dev = logits.device();
  const DType sd = stat_dtype(logits.dtype());
  CrossEntropyOut out{Tensor::empty(targets.shape(), sd, dev), Tensor::empty(targets.shape(), sd, dev)};
  if (rows == 0) return out;
  dispatch(
      dev,
      [&] {
        check_target_range(targets, V, ignore_index);
        const Tensor lf = widen_half(logits);
        dispatch_cpu_float(lf.dtype(), "cross_entropy", [&](auto tag) {
          using T = decltype(tag);
          cpu::cross_entropy_forward<T>(lf.data<T>(), targets.data<int32_t>(), out.loss.data<T>(), out.lse.data<T>(),
                                        rows, V, ignore_index);
        });
      },
      [&](Stream s) {
        cuda::CrossEntropyForwardParams p;
        p.logits = logits.data_ptr();
        p.targets = targets.data<int32_t>();
        p.loss = out.loss.data<float>();
        p.lse = out.lse.data<float>();
        p.rows = rows;
        p.vocab = V;
        p.row_stride = row_stride(logits);
        p.ignore_index = ignore_index;
        p.dtype = logits.dtype();
        cuda::cross_entropy_forward(p, s);
      });
  return out;
}

namespace {

// Validated inputs of either backward: the targets as int32, dloss and lse contiguous.
struct BackwardInputs {
  Tensor targets, dloss, lse;
};

BackwardInputs backward_inputs(const char* op, const Tensor& dloss0, const Tensor& logits0, const Tensor& targets0,
                               const Tensor& lse0) {
  BackwardInputs in;
  in.targets = checked_targets(op, logits0, targets0);  // (N)
  const DType sd = stat_dtype(logits0.dtype());
  for (const Tensor* t : {&dloss0, &lse0}) {
    FT_CHECK_ARG(t->shape() == in.targets.shape() && t->dtype() == sd && t->device() == logits0.device(), "[", op,
                 "] dloss and lse must be ", sd, " of shape ", in.targets.shape(), " on ", logits0.device(), ", got ",
                 t->shape(), " ", t->dtype(), " on ", t->device());
  }
  in.dloss = dloss0.contiguous();
  in.lse = lse0.contiguous();
  return in;
}

// dlogits (rows ld apart like logits', may be logits themselves on CUDA) from logits; zero_to > V
// also zeroes each dlogits row's padding (CUDA only).
void backward_into(const BackwardInputs& in, const Tensor& logits, const Tensor& dlogits, int32_t ignore_index,
                   int64_t zero_to) {
  const int64_t V = logits.size(-1), rows = in.targets.numel(), ld = row_stride(logits);
  if (rows == 0) return;
  dispatch(
      logits.device(),
      [&] {
        check_target_range(in.targets, V, ignore_index);
        const Tensor lf = widen_half(logits);
        WideOutput df(dlogits);
        dispatch_cpu_float(lf.dtype(), "cross_entropy_backward", [&](auto tag) {
          using T = decltype(tag);
          cpu::cross_entropy_backward<T>(lf.data<T>(), in.targets.data<int32_t>(), in.lse.data<T>(),
                                         in.dloss.data<T>(), df.tensor().data<T>(), rows, V, ignore_index);
        });
        df.round_into_output();
      },
      [&](Stream s) {
        cuda::CrossEntropyBackwardParams p;
        p.logits = logits.data_ptr();
        p.targets = in.targets.data<int32_t>();
        p.lse = in.lse.data<float>();
        p.dloss = in.dloss.data<float>();
        p.dlogits = dlogits.data_ptr();
        p.rows = rows;
        p.vocab = V;
        p.row_stride = ld;
        p.zero_to = zero_to;
        p.ignore_index = ignore_index;
        p.dtype = logits.dtype();
        cuda::cross_entropy_backward(p, s);
      });
}

}  // namespace

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits0, const Tensor& targets, const Tensor& lse,
                              int32_t ignore_index) {
  const BackwardInputs in = backward_inputs("cross_entropy_backward", dloss, logits0, targets, lse);
  const Tensor logits = logits_rows(logits0);
  const int64_t V = logits.size(-1), ld = row_stride(logits);
  // (..., V), rows ld apart like the logits' (padded rows stay padded: the head's backward
  // products then run on aligned rows, see MatmulOptions::align_rows).
  Shape buffer = logits.shape();
  if (ld > V) buffer.back() = ld;
  Tensor dlogits = Tensor::empty(buffer, logits.dtype(), logits.device()).slice(-1, 0, V);
  backward_into(in, logits, dlogits, ignore_index, 0);
  return dlogits;
}

void cross_entropy_backward_(const Tensor& dloss, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                             int32_t ignore_index) {
  const BackwardInputs in = backward_inputs("cross_entropy_backward_", dloss, logits, targets, lse);
  FT_CHECK_ARG(rows_collapse(logits) || logits.dim() == 1, "[cross_entropy_backward_] the logits ", logits.shape(),
               " with strides ", logits.strides(), " are not a stack of rows; in place needs contiguous or padded rows");
  // Both references read and write element by element, so dlogits may be the logits' memory.
  backward_into(in, logits, logits, ignore_index, logits.is_cuda() ? row_stride(logits) : 0);
}

Tensor cross_entropy_loss_and_grad_(const Tensor& logits, const Tensor& targets0, const Tensor& grad_scale,
                                    double row_scale, int32_t ignore_index) {
  const Tensor targets = checked_targets("cross_entropy_loss_and_grad_", logits, targets0);  // (N)
  FT_CHECK_ARG(rows_collapse(logits) || logits.dim() == 1, "[cross_entropy_loss_and_grad_] the logits ",
               logits.shape(), " with strides ", logits.strides(),
               " are not a stack of rows; in place needs contiguous or padded rows");
  const DType sd = stat_dtype(logits.dtype());
  if (grad_scale.defined()) {
    FT_CHECK_ARG(grad_scale.numel() == 1 && grad_scale.dtype() == sd && grad_scale.device() == logits.device(),
                 "[cross_entropy_loss_and_grad_] grad_scale must be one ", sd, " element on ", logits.device(),
                 ", got ", grad_scale.shape(), " ", grad_scale.dtype(), " on ", grad_scale.device());
  }
  Tensor loss;
  dispatch(
      logits.device(),
      [&] {  // the reference: two passes
        const CrossEntropyOut ce = cross_entropy_forward(logits, targets, ignore_index);
        const double g = row_scale * (grad_scale.defined() ? grad_scale.to_doubles()[0] : 1.0);
        cross_entropy_backward_(Tensor::full(targets.shape(), g, sd), logits, targets, ce.lse, ignore_index);
        loss = ce.loss;
      },
      [&](Stream s) {
        loss = Tensor::empty(targets.shape(), sd, logits.device());
        cuda::CrossEntropyLossGradParams p;
        p.logits = logits.data_ptr();
        p.targets = targets.data<int32_t>();
        p.loss = loss.data<float>();
        p.grad_scale = grad_scale.defined() ? grad_scale.data<float>() : nullptr;
        p.row_scale = static_cast<float>(row_scale);
        p.rows = targets.numel();
        p.vocab = logits.size(-1);
        p.row_stride = row_stride(logits);
        p.zero_to = p.row_stride;
        p.ignore_index = ignore_index;
        p.dtype = logits.dtype();
        cuda::cross_entropy_loss_and_grad(p, s);
      });
  return loss;  // (...), the targets' shape
}

Tensor scalar_ratio(const Tensor& a, const Tensor& b) {
  FT_CHECK_ARG(a.defined() && b.defined() && a.numel() == 1 && b.numel() == 1 && a.dtype() == b.dtype() &&
                   a.device() == b.device() &&
                   (a.dtype() == DType::F32 || (a.dtype() == DType::F64 && !a.is_cuda())),
               "[scalar_ratio] needs two one-element f32 tensors (f64 also on the CPU) on one device, got ",
               a.defined() ? str(a.shape(), " ", a.dtype(), " on ", a.device()) : std::string("undefined"), " and ",
               b.defined() ? str(b.shape(), " ", b.dtype(), " on ", b.device()) : std::string("undefined"));
  Tensor out = Tensor::empty({1}, a.dtype(), a.device());
  dispatch(
      a.device(),
      [&] { out.fill_(a.to_doubles()[0] / b.to_doubles()[0]); },
      [&](Stream s) { cuda::scalar_ratio(a.data<float>(), b.data<float>(), out.data<float>(), s); });
  return out;
}

}  // namespace ft::ops
