#include "ops/cpu/layernorm.h"

#include <cmath>
#include <vector>

namespace ft::cpu {

template <class T>
void layernorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t rows,
                       int64_t cols, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += xr[c];
    const double m = sum / cols;
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - m) * (xr[c] - m);
    const double s = 1.0 / std::sqrt(var / cols + eps);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<T>((xr[c] - m) * s * w[c] + b[c]);
    mean[r] = static_cast<T>(m);
    rstd[r] = static_cast<T>(s);
  }
}

// With xhat = (x - mean) * rstd and g = dy * w:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dweight = sum_rows dy * xhat,
//   dbias = sum_rows dy.
template <class T>
void layernorm_backward(const T* dy, const T* x, const T* w, const T* mean, const T* rstd, T* dx,
                        T* dweight, T* dbias, int64_t rows, int64_t cols) {
  std::vector<double> dw(static_cast<size_t>(cols), 0.0), db(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    const T* gr = dy + r * cols;
    const double m = mean[r], s = rstd[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double xh = (xr[c] - m) * s, g = static_cast<double>(gr[c]) * w[c];
      sum_g += g;
      sum_gx += g * xh;
      dw[c] += static_cast<double>(gr[c]) * xh;
      db[c] += gr[c];
    }
    const double mean_g = sum_g / cols, mean_gx = sum_gx / cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double xh = (xr[c] - m) * s, g = static_cast<double>(gr[c]) * w[c];
      dx[r * cols + c] = static_cast<T>(s * (g - mean_g - xh * mean_gx));
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    dweight[c] = static_cast<T>(dw[c]);
    dbias[c] = static_cast<T>(db[c]);
  }
}

template void layernorm_forward<float>(const float*, const float*, const float*, float*, float*, float*, int64_t, int64_t, double);
template void layernorm_forward<double>(const double*, const double*, const double*, double*, double*, double*, int64_t, int64_t, double);
template void layernorm_backward<float>(const float*, const float*, const float*, const float*, const float*, float*, float*, float*, int64_t, int64_t);
template void layernorm_backward<double>(const double*, const double*, const double*, const double*, const double*, double*, double*, double*, int64_t, int64_t);

}  // namespace ft::cpu
