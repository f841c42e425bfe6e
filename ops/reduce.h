// Sum and mean over one axis, for any floating dtype. Accumulation is in fp32 (f64 for f64
// inputs); the result has the input's dtype. Reduction order is fixed by the shape alone, so
// results are deterministic run to run (and across cards: no split depends on the SM count).
#pragma once

#include "core/tensor.h"

namespace ft::ops {

// x reduced over `axis` (negative counts from the end); keepdim leaves a size-1 axis in place.
Tensor sum(const Tensor& x, int axis, bool keepdim = false);
Tensor mean(const Tensor& x, int axis, bool keepdim = false);

// The backward of both: dy (x_shape reduced over `axis`, kept or not) repeated along `axis` to
// x_shape and multiplied by `scale` (1 for sum, 1 / x_shape[axis] for mean).
Tensor reduce_backward(const Tensor& dy, const Shape& x_shape, int axis, double scale);

// out (C) f32 += the sum of x's rows, x (..., C) any floating dtype and a stack of rows
// (contiguous or padded rows): a bias gradient added straight into its fp32 gradient buffer, with
// no rounding of the sum to x's dtype and no separate add (autograd::direct_grad). The sum is in
// fp32 (f64 for f64 x and out) in an order fixed by the shape alone: reproducible run to run.
void sum_rows_into(const Tensor& x, const Tensor& out);

}  // namespace ft::ops
