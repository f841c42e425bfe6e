#include "ops/cpu/embedding.h"

#include <cstring>

namespace ft::cpu {

void embedding_forward(const int32_t* ids, const void* weight, void* out, int64_t n, size_t row_bytes) {
  const auto* w = static_cast<const unsigned char*>(weight);
  auto* o = static_cast<unsigned char*>(out);
  for (int64_t i = 0; i < n; ++i) std::memcpy(o + i * row_bytes, w + static_cast<size_t>(ids[i]) * row_bytes, row_bytes);
}

template <class T>
void embedding_backward(const int32_t* ids, const T* dout, T* dweight, int64_t n, int64_t cols) {
  for (int64_t i = 0; i < n; ++i) {
    T* row = dweight + static_cast<int64_t>(ids[i]) * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += dout[i * cols + c];
  }
}

template void embedding_backward<float>(const int32_t*, const float*, float*, int64_t, int64_t);
template void embedding_backward<double>(const int32_t*, const double*, double*, int64_t, int64_t);

}  // namespace ft::cpu
