// Reference sum of squares (accumulated in double) for the gradient norm.
#pragma once

#include <cstdint>

namespace ft::cpu {

template <class T>
double sum_of_squares(const T* x, int64_t n);

}  // namespace ft::cpu
