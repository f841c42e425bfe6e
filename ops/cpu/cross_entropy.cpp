#include "ops/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace ft::cpu {

template <class T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* loss, T* lse, int64_t rows,
                           int64_t vocab, int32_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) {
      loss[r] = lse[r] = 0;
      continue;
    }
    const T* x = logits + r * vocab;
    const double m = *std::max_element(x, x + vocab);
    double sum = 0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(x[c] - m);
    const double l = m + std::log(sum);
    lse[r] = static_cast<T>(l);
    loss[r] = static_cast<T>(l - x[targets[r]]);
  }
}

template <class T>
void cross_entropy_backward(const T* logits, const int32_t* targets, const T* lse, const T* dloss,
                            T* dlogits, int64_t rows, int64_t vocab, int32_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    T* d = dlogits + r * vocab;
    if (targets[r] == ignore_index) {
      std::fill(d, d + vocab, T(0));
      continue;
    }
    const T* x = logits + r * vocab;
    for (int64_t c = 0; c < vocab; ++c) {
      const double p = std::exp(static_cast<double>(x[c]) - lse[r]);
      d[c] = static_cast<T>((p - (c == targets[r] ? 1.0 : 0.0)) * dloss[r]);
    }
  }
}

template void cross_entropy_forward<float>(const float*, const int32_t*, float*, float*, int64_t, int64_t, int32_t);
template void cross_entropy_forward<double>(const double*, const int32_t*, double*, double*, int64_t, int64_t, int32_t);
template void cross_entropy_backward<float>(const float*, const int32_t*, const float*, const float*, float*, int64_t, int64_t, int32_t);
template void cross_entropy_backward<double>(const double*, const int32_t*, const double*, const double*, double*, int64_t, int64_t, int32_t);

}  // namespace ft::cpu
