#include "ops/cpu/dropout.h"

namespace ft::cpu {

template <class T>
void dropout(const T* x, T* y, int64_t rows, int64_t cols, const DropoutParams& d) {
  const T scale = static_cast<T>(d.keep_scale);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const bool keep = dropout_keep_at(d, 0, static_cast<uint32_t>(r), static_cast<uint32_t>(c));
      y[r * cols + c] = keep ? x[r * cols + c] * scale : T(0);
    }
  }
}

template void dropout<float>(const float*, float*, int64_t, int64_t, const DropoutParams&);
template void dropout<double>(const double*, double*, int64_t, int64_t, const DropoutParams&);

}  // namespace ft::cpu
