#include "ops/grad_norm.h"

#include <cmath>

#include "ops/cpu/grad_norm.h"
#include "ops/cuda/grad_norm.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {

namespace {

void check_grads(const char* op, const std::vector<Tensor>& grads) {
  FT_CHECK_ARG(!grads.empty(), "[", op, "] no tensors given");
  const Device device = grads[0].defined() ? grads[0].device() : Device::cpu();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    FT_CHECK_ARG(g.defined(), "[", op, "] tensor ", i, " is undefined");
    FT_CHECK_ARG(g.dtype() == DType::F32 || (g.dtype() == DType::F64 && g.is_cpu()), "[", op, "] tensor ", i, " ",
                 g.shape(), " is ", g.dtype(), " on ", g.device(), "; need f32 (or f64 on the CPU)");
    FT_CHECK_ARG(g.device() == device, "[", op, "] tensor ", i, " on ", g.device(), ", tensor 0 on ", device);
    FT_CHECK_ARG(g.is_contiguous(), "[", op, "] tensor ", i, " ", g.shape(), " must be contiguous, has strides ",
                 g.strides());
  }
}

// grads[i] += each of addends[i] in turn (when there are any), then the norm of grads.
GradNorm norm_after_adding(const std::vector<Tensor>& grads, const std::vector<std::vector<Tensor>>& addends,
                           DType add_dtype) {
  const Device device = grads[0].device();
  GradNorm out;
  out.norm = Tensor::empty({1}, DType::F32, device);
  out.nonfinite = Tensor::empty({1}, DType::F32, device);
  dispatch(
      device,
      [&] {
        double s = 0;
        for (size_t i = 0; i < grads.size(); ++i) {
          const Tensor& g = grads[i];
          for (const Tensor& a : addends[i]) add_(g, a);  // the reference: add_'s bits, one addend at a time
          dispatch_cpu_float(g.dtype(), "grad_norm", [&](auto tag) {
            using T = decltype(tag);
            s += cpu::sum_of_squares<T>(g.data<T>(), g.numel());
          });
        }
        out.norm.data<float>()[0] = static_cast<float>(std::sqrt(s));
        out.nonfinite.data<float>()[0] = std::isfinite(s) ? 0.f : 1.f;
      },
      [&](Stream stream) {
        std::vector<cuda::GradNormSegment> segments;
        int64_t partials = 0;
        for (size_t i = 0; i < grads.size(); ++i) {
          const Tensor& g = grads[i];
          // More addends than one pass takes: the first ones added by add_, in the same order.
          const size_t extra = addends[i].size() > cuda::kGradNormMaxAddends
                                   ? addends[i].size() - cuda::kGradNormMaxAddends
                                   : 0;
          for (size_t j = 0; j < extra; ++j) add_(g, addends[i][j]);
          cuda::GradNormSegment seg;
          seg.x = g.data<float>();
          seg.n = g.numel();
          for (size_t j = extra; j < addends[i].size(); ++j) seg.add[seg.adds++] = addends[i][j].data_ptr();
          segments.push_back(seg);
          partials += cuda::grad_norm_blocks(g.numel());
        }
        // Freed on return while the kernels may still run: the caching allocator hands the block
        // out again only to work queued later on this stream.
        const Tensor partial = Tensor::empty({partials}, DType::F64, device);
        cuda::GradNormParams p;
        p.segments = segments.data();
        p.count = static_cast<int>(segments.size());
        p.add_dtype = add_dtype;
        p.partial = static_cast<double*>(partial.data_ptr());
        p.norm = out.norm.data<float>();
        p.nonfinite = out.nonfinite.data<float>();
        cuda::grad_norm(p, stream);
      });
  return out;
}

}  // namespace

GradNorm grad_norm(const std::vector<Tensor>& grads) {
  check_grads("grad_norm", grads);
  return norm_after_adding(grads, std::vector<std::vector<Tensor>>(grads.size()), DType::F32);
}

GradNorm grad_norm(const Tensor& grads) { return grad_norm(std::vector<Tensor>{grads}); }

GradNorm add_then_grad_norm(const std::vector<Tensor>& grads, const std::vector<std::vector<Tensor>>& addends) {
  constexpr const char* op = "add_then_grad_norm";
  check_grads(op, grads);
  FT_CHECK_ARG(addends.size() == grads.size(), "[", op, "] ", grads.size(), " tensors but ", addends.size(),
               " lists of addends");
  DType add_dtype = DType::F32;
  bool first = true;
  for (size_t i = 0; i < grads.size(); ++i) {
    FT_CHECK_ARG(grads[i].dtype() == DType::F32, "[", op, "] tensor ", i, " is ", grads[i].dtype(), "; need f32");
    for (size_t j = 0; j < addends[i].size(); ++j) {
      const Tensor& a = addends[i][j];
      FT_CHECK_ARG(a.defined(), "[", op, "] addend ", j, " of tensor ", i, " is undefined");
      FT_CHECK_ARG(a.dtype() == DType::F32 || is_half(a.dtype()), "[", op, "] addend ", j, " of tensor ", i, " is ",
                   a.dtype(), "; need f32, bf16 or f16");
      FT_CHECK_ARG(first || a.dtype() == add_dtype, "[", op, "] addends of one dtype, got ", add_dtype, " and ",
                   a.dtype());
      FT_CHECK_ARG(a.numel() == grads[i].numel(), "[", op, "] addend ", j, " of tensor ", i, " has ", a.numel(),
                   " elements, the tensor ", grads[i].numel());
      FT_CHECK_ARG(a.device() == grads[i].device(), "[", op, "] addend ", j, " of tensor ", i, " on ", a.device(),
                   ", the tensor on ", grads[i].device());
      FT_CHECK_ARG(a.is_contiguous(), "[", op, "] addend ", j, " of tensor ", i, " must be contiguous, has strides ",
                   a.strides());
      add_dtype = a.dtype();
      first = false;
    }
  }
  return norm_after_adding(grads, addends, add_dtype);
}

}  // namespace ft::ops
