#include "ops/cpu/adamw.h"

#include <cmath>

namespace ft::cpu {

template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamWHyper& h) {
  const T b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
  const T decay = static_cast<T>(1.0 - h.lr * h.weight_decay);
  const T step_size = static_cast<T>(h.step_size), inv_sqrt_bc2 = static_cast<T>(h.inv_sqrt_bc2);
  const T eps = static_cast<T>(h.eps), scale = static_cast<T>(h.grad_scale);
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] * scale;
    m[i] = b1 * m[i] + (T(1) - b1) * gi;
    v[i] = b2 * v[i] + (T(1) - b2) * gi * gi;
    p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
  }
}

template void adamw_step<float>(float*, const float*, float*, float*, int64_t, const AdamWHyper&);
template void adamw_step<double>(double*, const double*, double*, double*, int64_t, const AdamWHyper&);

}  // namespace ft::cpu
