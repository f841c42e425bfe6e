// Elementwise arithmetic and dtype casts.
//
// Binary ops take tensors of one dtype and device. `b` either has a's shape or a trailing
// suffix of it (bias-style broadcast: a (B, T, C) + b (C)). The result is a new contiguous
// tensor of a's shape and dtype; arithmetic is done in fp32 (f64 for f64 tensors).
#pragma once

#include "core/tensor.h"
#include "ops/dispatch.h"

namespace ft::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
// alpha * x
Tensor scale(const Tensor& x, double alpha);
// dst += alpha * src, in place; same shape and dtype, dst contiguous (gradient accumulation) -- or
// an f32 dst and a bf16 / f16 src, widened as it is added (a half-width gradient sum received
// into fp32 gradients: ZeRO-1 over the copy engines).
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);
// dst = src * scale, or dst += src * scale (accumulate), in place, where scale is a one-element f32
// tensor (f32 or f64 on the CPU) on dst's device, read where it lives -- on CUDA by the kernel, so
// no host read and a captured CUDA graph reads its value at each replay. dst, src as add_'s.
void add_scaled_(const Tensor& dst, const Tensor& src, const Tensor& scale, bool accumulate = true);
// x converted to `dtype` (rounding to nearest even into bf16/f16; truncation into integers).
// Returns x itself when it already has that dtype.
Tensor cast(const Tensor& x, DType dtype);
// The same conversion into an existing contiguous `out` of x's numel (any shapes), on out's
// device: one pass, no allocation -- what a persistent buffer (a bf16 gradient bucket) needs.
void cast_into(const Tensor& out, const Tensor& x);
// x as f32 when it is bf16/f16, else x itself. CPU reference kernels take f32/f64: front-ends
// widen half tensors with this and round the results back with WideOutput.
Tensor widen_half(const Tensor& x);

// The output side of the same rule: what a CPU reference kernel writes for `out` -- an f32 scratch
// when out is bf16/f16, out itself otherwise -- and round_into_output(), which rounds the scratch
// into out once (a no-op when the kernel wrote out directly).
class WideOutput {
 public:
  explicit WideOutput(const Tensor& out);
  const Tensor& tensor() const { return wide_; }
  void round_into_output();

 private:
  Tensor out_, wide_;
};

// The CPU branch of a front-end whose reference kernel reads one floating tensor x and writes y in
// x's dtype: fn(const T* x, T* y) runs with T = float (f32, bf16, f16) or double (f64), between
// widen_half and WideOutput's rounding.
template <class Fn>
void run_cpu_widened(const char* op, const Tensor& x, const Tensor& y, Fn&& fn) {
  const Tensor xf = widen_half(x);
  WideOutput yf(y);
  dispatch_cpu_float(xf.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    fn(xf.data<T>(), yf.tensor().data<T>());
  });
  yf.round_into_output();
}

}  // namespace ft::ops
