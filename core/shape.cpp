#include "core/shape.h"

#include "core/error.h"

namespace ft {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

int normalize_axis(int axis, int dim, const char* op) {
  const int a = axis < 0 ? axis + dim : axis;
  FT_CHECK_ARG(a >= 0 && a < dim, "[", op, "] axis ", axis, " out of range for a ", dim,
               "-dimensional tensor");
  return a;
}

}  // namespace ft

namespace std {
ostream& operator<<(ostream& os, const vector<int64_t>& s) {
  os << '(';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ',';
  return os << ')';
}
}  // namespace std
