#include "ops/grad_norm.h"

#include <cmath>

#include "ops/cpu/grad_norm.h"
#include "ops/cuda/grad_norm.h"
#include "ops/dispatch.h"

namespace ft::ops {

GradNorm grad_norm(const std::vector<Tensor>& grads) {
  FT_CHECK_ARG(!grads.empty(), "[grad_norm] no tensors given");
  const Device device = grads[0].defined() ? grads[0].device() : Device::cpu();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    FT_CHECK_ARG(g.defined(), "[grad_norm] tensor ", i, " is undefined");
    FT_CHECK_ARG(g.dtype() == DType::F32 || (g.dtype() == DType::F64 && g.is_cpu()), "[grad_norm] tensor ", i,
                 " ", g.shape(), " is ", g.dtype(), " on ", g.device(), "; need f32 (or f64 on the CPU)");
    FT_CHECK_ARG(g.device() == device, "[grad_norm] tensor ", i, " on ", g.device(), ", tensor 0 on ", device);
    FT_CHECK_ARG(g.is_contiguous(), "[grad_norm] tensor ", i, " ", g.shape(), " must be contiguous, has strides ",
                 g.strides());
  }
  GradNorm out;
  out.norm = Tensor::empty({1}, DType::F32, device);
  out.nonfinite = Tensor::empty({1}, DType::F32, device);
  dispatch(
      device,
      [&] {
        double s = 0;
        for (const Tensor& g : grads) {
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
        for (const Tensor& g : grads) {
          segments.push_back({g.data<float>(), g.numel()});
          partials += cuda::grad_norm_blocks(g.numel());
        }
        // Freed on return while the kernels may still run: the caching allocator hands the block
        // out again only to work queued later on this stream.
        const Tensor partial = Tensor::empty({partials}, DType::F64, device);
        cuda::GradNormParams p;
        p.segments = segments.data();
        p.count = static_cast<int>(segments.size());
        p.partial = static_cast<double*>(partial.data_ptr());
        p.norm = out.norm.data<float>();
        p.nonfinite = out.nonfinite.data<float>();
        cuda::grad_norm(p, stream);
      });
  return out;
}

GradNorm grad_norm(const Tensor& grads) { return grad_norm(std::vector<Tensor>{grads}); }

}  // namespace ft::ops
