#include "ops/cpu/elementwise.h"

#include <cmath>

#include "core/error.h"
#include "core/half.h"

namespace ft::cpu {

template <class T>
void binary(BinaryOp op, const T* a, const T* b, T* out, int64_t n, int64_t nb) {
  for (int64_t i = 0; i < n; ++i) {
    const T y = b[i % nb];
    switch (op) {
      case BinaryOp::Add: out[i] = a[i] + y; break;
      case BinaryOp::Sub: out[i] = a[i] - y; break;
      case BinaryOp::Mul: out[i] = a[i] * y; break;
    }
  }
}

template <class T>
void scale(const T* x, T* out, int64_t n, double alpha) {
  // In T, like the CUDA kernel (float alpha), so f32 results agree bit for bit.
  const T a = static_cast<T>(alpha);
  for (int64_t i = 0; i < n; ++i) out[i] = a * x[i];
}

template <class T>
void add_inplace(T* dst, const T* src, int64_t n, double alpha) {
  const T a = static_cast<T>(alpha);
  for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] + a * src[i];
}

template void binary<float>(BinaryOp, const float*, const float*, float*, int64_t, int64_t);
template void binary<double>(BinaryOp, const double*, const double*, double*, int64_t, int64_t);
template void scale<float>(const float*, float*, int64_t, double);
template void scale<double>(const double*, double*, int64_t, double);
template void add_inplace<float>(float*, const float*, int64_t, double);
template void add_inplace<double>(double*, const double*, int64_t, double);

namespace {

double load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::BF16: return bf16_to_float(static_cast<const bf16*>(p)[i]);
    case DType::F16: return f16_to_float(static_cast<const f16*>(p)[i]);
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::U16: return static_cast<const uint16_t*>(p)[i];
    case DType::U8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::F64: static_cast<double*>(p)[i] = v; break;
    // Through float first: double -> bf16 directly could round twice differently from the GPU,
    // which rounds fp32 values; values that reach here came from fp32 math anyway.
    case DType::BF16: static_cast<bf16*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::F16: static_cast<f16*>(p)[i] = float_to_f16(static_cast<float>(v)); break;
    case DType::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::I64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::U16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case DType::U8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
  }
}

}  // namespace

void cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(dst, dst_dtype, i, load(src, src_dtype, i));
}

}  // namespace ft::cpu
