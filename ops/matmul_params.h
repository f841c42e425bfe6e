// The geometry of one (possibly batched) matrix product, shared by the CPU and CUDA kernels.
//
// Everything is row-major, as the tensors are:
//   D[i] (m, n) = alpha * op(A[i]) (m, k) * op(B[i]) (k, n) + beta * D[i] (+ bias (n) on every row)
// for i < batch, where op(X) = X^T when trans_x is set. A stored row-major matrix has unit
// stride along its columns and `ld` elements between rows (ld >= its column count).
// A batch stride of 0 repeats that operand for every batch entry (broadcast).
#pragma once

#include <cstdint>

namespace ft {

struct MatmulGeometry {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;  // a is stored (k, m) instead of (m, k)
  bool trans_b = false;  // b is stored (n, k) instead of (k, n)
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;  // elements between batch entries
  // double so that a CPU f64 product scaled by a tensor (MatmulOptions::alpha_scale) keeps its
  // precision; CUDA takes it as fp32.
  double alpha = 1.0;
  float beta = 0.f;  // 0: D is overwritten (its old contents may be garbage); 1: accumulate
};

}  // namespace ft
