#include "ops/cpu/residual_layernorm.h"

#include "core/half.h"
#include "ops/cpu/layernorm.h"

namespace ft::cpu {
namespace {

// v rounded to the storage dtype and back (the identity for f32 and f64 storage).
template <class T>
T round_to(T v, DType storage) {
  if (storage == DType::BF16) return static_cast<T>(bf16_to_float(float_to_bf16(static_cast<float>(v))));
  if (storage == DType::F16) return static_cast<T>(f16_to_float(float_to_f16(static_cast<float>(v))));
  return v;
}

// h (row, col) after dropout, as ops::dropout computes it (before rounding).
template <class T>
T dropped(T v, const DropoutParams& d, int64_t row, int64_t col) {
  const bool keep = dropout_keep_at(d, 0, static_cast<uint32_t>(row), static_cast<uint32_t>(col));
  return keep ? v * static_cast<T>(d.keep_scale) : T(0);
}

}  // namespace

template <class T>
void residual_layernorm_forward(const T* x, const T* h, const T* w, const T* b, T* y, T* z, T* mean, T* rstd,
                                int64_t rows, int64_t cols, double eps, const DropoutParams& d, bool dropout,
                                DType storage) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const T branch = dropout ? round_to(dropped(h[i], d, r, c), storage) : h[i];
      y[i] = round_to(x[i] + branch, storage);
    }
  }
  layernorm_forward<T>(y, w, b, z, mean, rstd, rows, cols, eps);
}

template <class T>
void residual_layernorm_backward(const T* gy, const T* gz, const T* y, const T* w, const T* mean, const T* rstd,
                                 T* dy, T* dh, T* dweight, T* dbias, int64_t rows, int64_t cols,
                                 const DropoutParams& d, bool dropout, DType storage) {
  layernorm_backward<T>(gz, y, w, mean, rstd, dy, dweight, dbias, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const T ln = round_to(dy[i], storage);
      dy[i] = gy != nullptr ? round_to(gy[i] + ln, storage) : ln;
      if (dropout) dh[i] = dropped(dy[i], d, r, c);
    }
  }
}

template void residual_layernorm_forward<float>(const float*, const float*, const float*, const float*, float*,
                                                float*, float*, float*, int64_t, int64_t, double,
                                                const DropoutParams&, bool, DType);
template void residual_layernorm_forward<double>(const double*, const double*, const double*, const double*,
                                                 double*, double*, double*, double*, int64_t, int64_t, double,
                                                 const DropoutParams&, bool, DType);
template void residual_layernorm_backward<float>(const float*, const float*, const float*, const float*,
                                                 const float*, const float*, float*, float*, float*, float*,
                                                 int64_t, int64_t, const DropoutParams&, bool, DType);
template void residual_layernorm_backward<double>(const double*, const double*, const double*, const double*,
                                                  const double*, const double*, double*, double*, double*,
                                                  double*, int64_t, int64_t, const DropoutParams&, bool, DType);

}  // namespace ft::cpu
