// Reference matrix product on the CPU (Eigen), for f32 and f64 (see ops/matmul_params.h).
#pragma once

#include "ops/matmul_params.h"

namespace ft::cpu {

// d = alpha * op(a) op(b) + beta * d (+ bias on every row when bias is not null).
template <class T>
void matmul(const T* a, const T* b, T* d, const T* bias, const MatmulGeometry& g);

}  // namespace ft::cpu
