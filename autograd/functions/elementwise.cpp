#include "autograd/functions/elementwise.h"

#include "autograd/function.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ft::autograd {
namespace {

// The gradient of a broadcast operand: sum over the leading axes it was repeated along.
Tensor reduce_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t inner = shape_numel(shape);
  return ops::sum(g.contiguous().view({g.numel() / inner, inner}), 0).view(shape);  // (repeats, inner)
}

struct AddBackward : Node {
  Shape a_shape, b_shape;
  double sign = 1.0;  // +1 for add, -1 for sub
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    const Tensor& g = go[0];
    Tensor gb;
    if (needs_grad[1]) gb = reduce_to_shape(sign > 0 ? g : ops::scale(g, -1.0), b_shape);
    return {needs_grad[0] ? g : Tensor(), gb};
  }
  const char* name() const override { return sign > 0 ? "AddBackward" : "SubBackward"; }
};

struct MulBackward : Node {
  Tensor a, b;
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    const Tensor& g = go[0];
    Tensor ga, gb;
    if (needs_grad[0]) ga = ops::mul(g, b);  // b broadcasts over g like it did over a
    if (needs_grad[1]) gb = reduce_to_shape(ops::mul(g, a), b.shape());
    return {ga, gb};
  }
  void release() override { a = b = Tensor(); }
  const char* name() const override { return "MulBackward"; }
};

struct ScaleBackward : Node {
  double alpha = 1.0;
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override { return {ops::scale(go[0], alpha)}; }
  const char* name() const override { return "ScaleBackward"; }
};

struct CastBackward : Node {
  DType from = DType::F32;
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override { return {ops::cast(go[0], from)}; }
  const char* name() const override { return "CastBackward"; }
};

Tensor add_or_sub(const Tensor& a, const Tensor& b, double sign) {
  Tensor y = sign > 0 ? ops::add(a, b) : ops::sub(a, b);
  if (needs_graph({a, b})) {
    auto node = std::make_shared<AddBackward>();
    node->a_shape = a.shape();
    node->b_shape = b.shape();
    node->sign = sign;
    record(node, {a, b}, {y});
  }
  return y;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return add_or_sub(a, b, 1.0); }
Tensor sub(const Tensor& a, const Tensor& b) { return add_or_sub(a, b, -1.0); }

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = ops::mul(a, b);
  if (needs_graph({a, b})) {
    auto node = std::make_shared<MulBackward>();
    node->a = a.detach();
    node->b = b.detach();
    record(node, {a, b}, {y});
  }
  return y;
}

Tensor scale(const Tensor& x, double alpha) {
  Tensor y = ops::scale(x, alpha);
  if (needs_graph({x})) {
    auto node = std::make_shared<ScaleBackward>();
    node->alpha = alpha;
    record(node, {x}, {y});
  }
  return y;
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor y = ops::cast(x, dtype);
  if (needs_graph({x})) {
    auto node = std::make_shared<CastBackward>();
    node->from = x.dtype();
    record(node, {x}, {y});
  }
  return y;
}

}  // namespace ft::autograd
