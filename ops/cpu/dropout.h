// Reference dropout on a contiguous (rows, cols) buffer (see ops/dropout.h for the mask).
#pragma once

#include <cstdint>

#include "core/dropout_mask.h"

namespace ft::cpu {

template <class T>
void dropout(const T* x, T* y, int64_t rows, int64_t cols, const DropoutParams& d);

}  // namespace ft::cpu
