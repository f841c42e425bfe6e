#include "ops/adamw.h"

#include <cmath>

#include "ops/cpu/adamw.h"
#include "ops/cuda/adamw.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

void check_buffer(const char* name, const Tensor& t, const Tensor& params) {
  FT_CHECK_ARG(t.defined(), "[adamw_step] ", name, " is undefined");
  FT_CHECK_ARG(t.dtype() == DType::F32, "[adamw_step] ", name, " must be f32, got ", t.dtype());
  FT_CHECK_ARG(t.numel() == params.numel(), "[adamw_step] ", name, " ", t.shape(), " has ", t.numel(),
               " elements, params ", params.shape(), " has ", params.numel());
  FT_CHECK_ARG(t.device() == params.device(), "[adamw_step] ", name, " on ", t.device(), ", params on ",
               params.device());
  FT_CHECK_ARG(t.is_contiguous(), "[adamw_step] ", name, " ", t.shape(), " must be contiguous, has strides ",
               t.strides());
}

}  // namespace

void adamw_step(const Tensor& params, const Tensor& grads, const Tensor& m, const Tensor& v,
                const AdamWOptions& o, const Tensor& copy) {
  check_buffer("params", params, params);
  check_buffer("grads", grads, params);
  check_buffer("m", m, params);
  check_buffer("v", v, params);
  FT_CHECK_ARG(o.step >= 1, "[adamw_step] step counts from 1, got ", o.step);
  FT_CHECK_ARG(o.lr >= 0.f && o.eps > 0.f, "[adamw_step] need lr >= 0 and eps > 0, got lr ", o.lr, ", eps ", o.eps);
  FT_CHECK_ARG(o.beta1 >= 0.f && o.beta1 < 1.f && o.beta2 >= 0.f && o.beta2 < 1.f,
               "[adamw_step] betas must be in [0, 1), got ", o.beta1, ", ", o.beta2);
  if (copy.defined()) {
    FT_CHECK_ARG(is_half(copy.dtype()), "[adamw_step] working copy must be bf16 or f16, got ", copy.dtype());
    FT_CHECK_ARG(copy.numel() == params.numel() && copy.is_contiguous() && copy.device() == params.device(),
                 "[adamw_step] working copy ", copy.shape(), " on ", copy.device(),
                 " must be contiguous with the params' ", params.numel(), " elements on ", params.device());
  }
  if (o.grad_norm.defined()) {
    FT_CHECK_ARG(o.grad_norm.numel() == 1 && o.grad_norm.dtype() == DType::F32 &&
                     o.grad_norm.device() == params.device(),
                 "[adamw_step] grad_norm must be a one-element f32 tensor on ", params.device(), ", got ",
                 o.grad_norm.dtype(), " ", o.grad_norm.shape(), " on ", o.grad_norm.device());
  }
  FT_CHECK_ARG(o.max_grad_norm <= 0.f || o.grad_norm.defined(),
               "[adamw_step] max_grad_norm ", o.max_grad_norm, " needs the grad_norm tensor");
  if (params.numel() == 0) return;

  // Bias corrections once per call, in double on the host.
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(o.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(o.step));
  const double step_size = o.lr / bc1;
  const double inv_sqrt_bc2 = 1.0 / std::sqrt(bc2);
  dispatch(
      params.device(),
      [&] {
        const Tensor norm_t = o.grad_norm.defined() ? o.grad_norm.contiguous() : Tensor();
        double scale = o.grad_scale;
        if (norm_t.defined()) {
          const double norm = norm_t.data<float>()[0];
          if (!std::isfinite(norm)) return;  // skipped step, as on the GPU
          if (o.max_grad_norm > 0.f) scale *= std::fmin(1.0, o.max_grad_norm / (norm * o.grad_scale + 1e-6));
        }
        cpu::AdamWHyper h;
        h.lr = o.lr;
        h.beta1 = o.beta1;
        h.beta2 = o.beta2;
        h.eps = o.eps;
        h.weight_decay = o.weight_decay;
        h.step_size = step_size;
        h.inv_sqrt_bc2 = inv_sqrt_bc2;
        h.grad_scale = scale;
        cpu::adamw_step<float>(params.data<float>(), grads.data<float>(), m.data<float>(), v.data<float>(),
                               params.numel(), h);
        if (copy.defined()) Tensor(copy).copy_(cast(params, copy.dtype()).view(copy.shape()));
      },
      [&](Stream s) {
        cuda::AdamWKernelParams k;
        k.p = params.data<float>();
        k.g = grads.data<float>();
        k.m = m.data<float>();
        k.v = v.data<float>();
        k.copy = copy.defined() ? copy.data_ptr() : nullptr;
        k.copy_dtype = copy.defined() ? copy.dtype() : DType::BF16;
        k.n = params.numel();
        k.beta1 = o.beta1;
        k.beta2 = o.beta2;
        k.eps = o.eps;
        k.decay = static_cast<float>(1.0 - static_cast<double>(o.lr) * o.weight_decay);
        k.step_size = static_cast<float>(step_size);
        k.inv_sqrt_bc2 = static_cast<float>(inv_sqrt_bc2);
        k.grad_scale = o.grad_scale;
        k.grad_norm = o.grad_norm.defined() ? o.grad_norm.data<float>() : nullptr;
        k.max_grad_norm = o.max_grad_norm;
        cuda::adamw_step(k, s);
      });
}

}  // namespace ft::ops
