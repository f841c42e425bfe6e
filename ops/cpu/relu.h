// Reference ReLU kernels over n contiguous elements, T = float or double.
#pragma once

#include <cstdint>

namespace ft::cpu {

template <class T>
void relu_forward(const T* x, T* y, int64_t n);
// dx = dy where x > 0, else 0
template <class T>
void relu_backward(const T* dy, const T* x, T* dx, int64_t n);

}  // namespace ft::cpu
