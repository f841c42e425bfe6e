// Reference AdamW step on contiguous buffers (see ops/adamw.h for the update).
#pragma once

#include <cstdint>

namespace ft::cpu {

struct AdamWHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double step_size = 0;     // lr / (1 - beta1^step)
  double inv_sqrt_bc2 = 0;  // 1 / sqrt(1 - beta2^step)
  double grad_scale = 1;    // everything that multiplies the gradient (scale and clip)
};

template <class T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, const AdamWHyper& h);

}  // namespace ft::cpu
