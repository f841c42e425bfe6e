#include "ops/cpu/reduce.h"

#include <algorithm>
#include <vector>

namespace ft::cpu {

template <class T>
void reduce_sum(const T* x, T* y, int64_t outer, int64_t r, int64_t inner, double scale) {
  std::vector<T> acc(static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), T(0));
    const T* xo = x + o * r * inner;
    for (int64_t j = 0; j < r; ++j)  // row by row: walks x in memory order
      for (int64_t i = 0; i < inner; ++i) acc[i] += xo[j * inner + i];
    for (int64_t i = 0; i < inner; ++i) y[o * inner + i] = static_cast<T>(acc[i] * static_cast<T>(scale));
  }
}

template <class T>
void reduce_backward(const T* dy, T* dx, int64_t outer, int64_t r, int64_t inner, double scale) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < r; ++j)
      for (int64_t i = 0; i < inner; ++i)
        dx[(o * r + j) * inner + i] = static_cast<T>(dy[o * inner + i] * static_cast<T>(scale));
}

template <class T>
void sum_rows_into(const T* x, T* out, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    double acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += static_cast<double>(x[r * cols + c]);
    out[c] = static_cast<T>(static_cast<double>(out[c]) + acc);
  }
}

template void sum_rows_into<float>(const float*, float*, int64_t, int64_t);
template void sum_rows_into<double>(const double*, double*, int64_t, int64_t);
template void reduce_sum<float>(const float*, float*, int64_t, int64_t, int64_t, double);
template void reduce_sum<double>(const double*, double*, int64_t, int64_t, int64_t, double);
template void reduce_backward<float>(const float*, float*, int64_t, int64_t, int64_t, double);
template void reduce_backward<double>(const double*, double*, int64_t, int64_t, int64_t, double);

}  // namespace ft::cpu
