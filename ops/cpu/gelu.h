// Reference GELU kernels, tanh form: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// n contiguous elements, T = float or double.
#pragma once

#include <cstdint>

namespace ft::cpu {

template <class T>
void gelu_forward(const T* x, T* y, int64_t n);
// dx = dy * gelu'(x)
template <class T>
void gelu_backward(const T* dy, const T* x, T* dx, int64_t n);

}  // namespace ft::cpu
