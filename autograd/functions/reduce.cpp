#include "autograd/functions/reduce.h"

#include "autograd/function.h"
#include "ops/reduce.h"

namespace ft::autograd {
namespace {

// d x = d y repeated along the reduced axis, times 1 (sum) or 1 / n (mean).
struct ReduceBackward : Node {
  Shape x_shape;
  int axis = 0;
  double scale = 1.0;
  bool is_mean = false;
  std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) override {
    return {ops::reduce_backward(grad_outputs[0], x_shape, axis, scale)};
  }
  const char* name() const override { return is_mean ? "MeanBackward" : "SumBackward"; }
};

Tensor reduce(const Tensor& x, int axis, bool keepdim, bool is_mean) {
  Tensor y = is_mean ? ops::mean(x, axis, keepdim) : ops::sum(x, axis, keepdim);
  if (needs_graph({x})) {
    auto node = std::make_shared<ReduceBackward>();
    node->x_shape = x.shape();
    node->axis = normalize_axis(axis, x.dim(), is_mean ? "mean" : "sum");
    const int64_t n = x.size(node->axis);
    node->scale = is_mean ? 1.0 / static_cast<double>(n) : 1.0;
    node->is_mean = is_mean;
    record(node, {x}, {y});
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, int axis, bool keepdim) { return reduce(x, axis, keepdim, false); }
Tensor mean(const Tensor& x, int axis, bool keepdim) { return reduce(x, axis, keepdim, true); }

}  // namespace ft::autograd
