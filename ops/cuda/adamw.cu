#include <type_traits>

#include "core/cuda/check.h"
#include "ops/cuda/adamw.h"
#include "ops/cuda/dtype_dispatch.cuh"

namespace ft::cuda {
namespace {

constexpr int kBlock = 256;

// Stand-in copy type when no working copy is written.
struct NoCopy {};

__device__ __forceinline__ float adamw_update(float& p, float g, float& m, float& v, const AdamWKernelParams& k,
                                              float scale) {
  g *= scale;
  m = k.beta1 * m + (1.f - k.beta1) * g;
  v = k.beta2 * v + (1.f - k.beta2) * g * g;
  p = p * k.decay - k.step_size * m / (sqrtf(v) * k.inv_sqrt_bc2 + k.eps);
  return p;
}

// Everything that multiplies the gradient, or a negative value when the step must be skipped.
__device__ __forceinline__ float gradient_factor(const AdamWKernelParams& k) {
  float scale = k.grad_scale;
  if (k.grad_norm) {
    const float norm = *k.grad_norm;
    if (!isfinite(norm)) return -1.f;
    if (k.max_grad_norm > 0.f) scale *= fminf(1.f, k.max_grad_norm / (norm * k.grad_scale + 1e-6f));
  }
  return scale;
}

template <class C>
__device__ __forceinline__ void store_copy(void* copy, int64_t i, float value) {
  if constexpr (!std::is_same_v<C, NoCopy>) static_cast<C*>(copy)[i] = from_f32<C>(value);
}

// Four elements per thread and iteration with 16-byte loads; n4 = n / 4 vectors, the tail (and
// misaligned buffers, n4 = 0) go element by element.
template <class C>
__global__ void adamw_kernel(AdamWKernelParams k, int64_t n4) {
  const float scale = gradient_factor(k);
  if (scale < 0.f) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (int64_t i = first; i < n4; i += stride) {
    float4 p = reinterpret_cast<const float4*>(k.p)[i];
    const float4 g = reinterpret_cast<const float4*>(k.g)[i];
    float4 m = reinterpret_cast<const float4*>(k.m)[i];
    float4 v = reinterpret_cast<const float4*>(k.v)[i];
    adamw_update(p.x, g.x, m.x, v.x, k, scale);
    adamw_update(p.y, g.y, m.y, v.y, k, scale);
    adamw_update(p.z, g.z, m.z, v.z, k, scale);
    adamw_update(p.w, g.w, m.w, v.w, k, scale);
    reinterpret_cast<float4*>(k.p)[i] = p;
    reinterpret_cast<float4*>(k.m)[i] = m;
    reinterpret_cast<float4*>(k.v)[i] = v;
    if constexpr (!std::is_same_v<C, NoCopy>) {
      struct alignas(4 * sizeof(C)) Pack4 {
        C v[4];
      } out;
      out.v[0] = from_f32<C>(p.x);
      out.v[1] = from_f32<C>(p.y);
      out.v[2] = from_f32<C>(p.z);
      out.v[3] = from_f32<C>(p.w);
      reinterpret_cast<Pack4*>(k.copy)[i] = out;
    }
  }
  for (int64_t i = 4 * n4 + first; i < k.n; i += stride) {
    float p = k.p[i], m = k.m[i], v = k.v[i];
    adamw_update(p, k.g[i], m, v, k, scale);
    k.p[i] = p;
    k.m[i] = m;
    k.v[i] = v;
    store_copy<C>(k.copy, i, p);
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <class C>
void launch(const AdamWKernelParams& k, Stream s) {
  const bool vec = aligned(k.p, 16) && aligned(k.g, 16) && aligned(k.m, 16) && aligned(k.v, 16) &&
                   (std::is_same_v<C, NoCopy> || aligned(k.copy, 4 * sizeof(C)));
  const int64_t n4 = vec ? k.n / 4 : 0;
  const int64_t work = n4 + (k.n - 4 * n4);
  adamw_kernel<C><<<grid_1d(work, kBlock), kBlock, 0, s>>>(k, n4);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void adamw_step(const AdamWKernelParams& k, Stream s) {
  if (!k.copy) {
    launch<NoCopy>(k, s);
    return;
  }
  switch (k.copy_dtype) {
    case DType::BF16: launch<__nv_bfloat16>(k, s); return;
    case DType::F16: launch<__half>(k, s); return;
    default: break;
  }
  throw Error(str("[adamw_step] working copy must be bf16 or f16, got ", k.copy_dtype));
}

}  // namespace ft::cuda
