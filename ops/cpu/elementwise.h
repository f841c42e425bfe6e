// Reference elementwise kernels on contiguous buffers. `b` repeats every nb elements
// (nb == n for same-shape operands, nb == C for a bias over the last axis).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ft::cpu {

enum class BinaryOp { Add, Sub, Mul };

template <class T>
void binary(BinaryOp op, const T* a, const T* b, T* out, int64_t n, int64_t nb);
template <class T>
void scale(const T* x, T* out, int64_t n, double alpha);
template <class T>
void add_inplace(T* dst, const T* src, int64_t n, double alpha);
// Any dtype to any dtype, n contiguous elements.
void cast(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

}  // namespace ft::cpu
