#include "ops/cpu/grad_norm.h"

namespace ft::cpu {

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return s;
}

template double sum_of_squares<float>(const float*, int64_t);
template double sum_of_squares<double>(const double*, int64_t);

}  // namespace ft::cpu
