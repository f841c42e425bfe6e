// Shapes and element strides.
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

namespace ft {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;  // in elements, not bytes

int64_t shape_numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
// Maps a possibly negative axis into [0, dim); throws naming `op` when out of range.
int normalize_axis(int axis, int dim, const char* op);

}  // namespace ft

namespace std {
// Prints (2, 3, 4); lets error messages show shapes with <<.
ostream& operator<<(ostream& os, const vector<int64_t>& s);
}  // namespace std
