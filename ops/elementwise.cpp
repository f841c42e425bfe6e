#include "ops/elementwise.h"

#include "ops/cpu/elementwise.h"
#include "ops/cuda/elementwise.h"
#include "ops/dispatch.h"

namespace ft::ops {
namespace {

// b broadcasts when its shape is a trailing suffix of a's (including equal shapes).
bool is_suffix(const Shape& a, const Shape& b) {
  if (b.size() > a.size()) return false;
  for (size_t i = 0; i < b.size(); ++i)
    if (b[b.size() - 1 - i] != a[a.size() - 1 - i]) return false;
  return true;
}

void check_same_place(const char* op, const Tensor& a, const Tensor& b) {
  FT_CHECK_ARG(a.dtype() == b.dtype(), "[", op, "] dtypes differ: ", a.dtype(), " and ", b.dtype());
  FT_CHECK_ARG(a.device() == b.device(), "[", op, "] devices differ: ", a.device(), " and ", b.device());
}

Tensor binary(const char* op, cpu::BinaryOp cpu_op, cuda::BinaryKind cuda_kind, const Tensor& a0,
              const Tensor& b0) {
  check_same_place(op, a0, b0);
  FT_CHECK_ARG(is_floating(a0.dtype()), "[", op, "] needs a floating dtype, got ", a0.dtype());
  FT_CHECK_ARG(is_suffix(a0.shape(), b0.shape()), "[", op, "] shape ", b0.shape(),
               " does not match or broadcast to ", a0.shape(),
               " (b must equal a trailing part of a's shape)");
  const Tensor a = a0.contiguous(), b = b0.contiguous();
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (out.numel() == 0) return out;
  dispatch(
      a.device(),
      [&] {
        const Tensor af = widen_half(a), bf = widen_half(b);
        WideOutput of(out);
        dispatch_cpu_float(af.dtype(), op, [&](auto tag) {
          using T = decltype(tag);
          cpu::binary<T>(cpu_op, af.data<T>(), bf.data<T>(), of.tensor().data<T>(), af.numel(), bf.numel());
        });
        of.round_into_output();
      },
      [&](Stream s) {
        cuda::BinaryParams p;
        p.a = a.data_ptr();
        p.b = b.data_ptr();
        p.out = out.data_ptr();
        p.n = a.numel();
        p.nb = b.numel();
        p.dtype = a.dtype();
        p.kind = cuda_kind;
        cuda::binary(p, s);
      });
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary("add", cpu::BinaryOp::Add, cuda::BinaryKind::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary("sub", cpu::BinaryOp::Sub, cuda::BinaryKind::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary("mul", cpu::BinaryOp::Mul, cuda::BinaryKind::Mul, a, b); }

namespace {
// The checks of the in-place adds (add_, add_scaled_); true when src is widened (f32 += bf16 / f16).
bool check_add_into(const char* op, const Tensor& dst, const Tensor& src) {
  const bool widen = dst.dtype() == DType::F32 && is_half(src.dtype());
  if (widen) FT_CHECK_ARG(dst.device() == src.device(), "[", op, "] devices differ: ", dst.device(), ", ", src.device());
  else check_same_place(op, dst, src);
  FT_CHECK_ARG(dst.shape() == src.shape(), "[", op, "] shapes differ: destination ", dst.shape(), ", source ",
               src.shape());
  FT_CHECK_ARG(dst.is_contiguous(), "[", op, "] destination must be contiguous, has strides ", dst.strides());
  FT_CHECK_ARG(is_floating(dst.dtype()), "[", op, "] needs a floating dtype, got ", dst.dtype());
  return widen;
}

// The axpby kernel's launch for scale and the in-place adds: dst = alpha (* *alpha_device) * src
// + beta * dst (beta 0: dst not read).
void axpby_into(const Tensor& dst, const Tensor& src, bool widen, float alpha, const float* alpha_device, float beta,
                Stream s) {
  cuda::AxpbyParams p;
  p.x = src.data_ptr();
  p.out = dst.data_ptr();
  p.n = dst.numel();
  p.alpha = alpha;
  p.alpha_device = alpha_device;
  p.beta = beta;
  p.dtype = dst.dtype();
  p.widen_x = widen;
  p.x_dtype = src.dtype();
  cuda::axpby(p, s);
}
}  // namespace

Tensor scale(const Tensor& x0, double alpha) {
  FT_CHECK_ARG(is_floating(x0.dtype()), "[scale] needs a floating dtype, got ", x0.dtype());
  const Tensor x = x0.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  dispatch(
      x.device(),
      [&] {
        run_cpu_widened("scale", x, out, [&](const auto* xp, auto* yp) { cpu::scale(xp, yp, x.numel(), alpha); });
      },
      [&](Stream s) { axpby_into(out, x, /*widen=*/false, static_cast<float>(alpha), nullptr, 0.f, s); });
  return out;
}

void add_(const Tensor& dst, const Tensor& src0, double alpha) {
  const bool widen = check_add_into("add_", dst, src0);  // f32 += a bf16 / f16 source
  const Tensor src = src0.contiguous();
  if (dst.numel() == 0) return;
  dispatch(
      dst.device(),
      [&] {
        if (widen) return add_(dst, cast(src, DType::F32), alpha);
        if (is_half(dst.dtype())) {
          Tensor df = cast(dst, DType::F32);
          cpu::add_inplace<float>(df.data<float>(), cast(src, DType::F32).data<float>(), df.numel(), alpha);
          Tensor(dst).copy_(cast(df, dst.dtype()));
          return;
        }
        dispatch_cpu_float(dst.dtype(), "add_", [&](auto tag) {
          using T = decltype(tag);
          cpu::add_inplace<T>(dst.data<T>(), src.data<T>(), dst.numel(), alpha);
        });
      },
      [&](Stream s) { axpby_into(dst, src, widen, static_cast<float>(alpha), nullptr, 1.f, s); });
}

void add_scaled_(const Tensor& dst, const Tensor& src0, const Tensor& scale, bool accumulate) {
  const bool widen = check_add_into("add_scaled_", dst, src0);
  FT_CHECK_ARG(scale.defined() && scale.numel() == 1 && scale.device() == dst.device() &&
                   (scale.dtype() == DType::F32 || (scale.dtype() == DType::F64 && !scale.is_cuda())),
               "[add_scaled_] the scale must be one f32 element (f64 also on the CPU) on ", dst.device(), ", got ",
               scale.defined() ? str(scale.shape(), " ", scale.dtype(), " on ", scale.device()) : std::string("undefined"));
  const Tensor src = src0.contiguous();
  if (dst.numel() == 0) return;
  dispatch(
      dst.device(),
      [&] {
        const double a = scale.to_doubles()[0];
        if (!accumulate) Tensor(dst).zero_();
        add_(dst, src, a);
      },
      [&](Stream s) { axpby_into(dst, src, widen, 1.f, scale.data<float>(), accumulate ? 1.f : 0.f, s); });
}

Tensor widen_half(const Tensor& x) { return is_half(x.dtype()) ? cast(x, DType::F32) : x; }

WideOutput::WideOutput(const Tensor& out)
    : out_(out), wide_(is_half(out.dtype()) ? Tensor::empty(out.shape(), DType::F32) : out) {}

void WideOutput::round_into_output() {
  if (!wide_.is_same(out_)) out_.copy_(cast(wide_, out_.dtype()));
}

Tensor cast(const Tensor& x0, DType dtype) {
  if (x0.dtype() == dtype) return x0;
  const Tensor x = x0.contiguous();
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  cast_into(out, x);
  return out;
}

void cast_into(const Tensor& out, const Tensor& x0) {
  const DType dtype = out.dtype();
  FT_CHECK_ARG(!(x0.is_cuda() && (dtype == DType::F64 || x0.dtype() == DType::F64)),
               "[cast] f64 is CPU-only (reference computations); tensor is on ", x0.device());
  FT_CHECK_ARG(out.is_contiguous() && out.numel() == x0.numel() && out.device() == x0.device(), "[cast] out ",
               out.shape(), " on ", out.device(), out.is_contiguous() ? "" : " (strided)", " does not fit x ", x0.shape(),
               " on ", x0.device());
  const Tensor x = x0.contiguous();
  if (out.numel() == 0) return;
  dispatch(
      x.device(), [&] { cpu::cast(x.data_ptr(), x.dtype(), out.data_ptr(), dtype, x.numel()); },
      [&](Stream s) {
        cuda::CastParams p;
        p.src = x.data_ptr();
        p.dst = out.data_ptr();
        p.n = x.numel();
        p.src_dtype = x.dtype();
        p.dst_dtype = dtype;
        cuda::cast(p, s);
      });
}

}  // namespace ft::ops
