#include "autograd/functions/gelu.h"

#include "autograd/function.h"
#include "ops/gelu.h"

namespace ft::autograd {
namespace {

struct GeluBackward : Node {
  Tensor x;  // the backward recomputes gelu'(x) from x; y is not kept
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor()};
    return {ops::gelu_backward(go[0], x)};
  }
  void release() override { x = Tensor(); }
  const char* name() const override { return "GeluBackward"; }
};

}  // namespace

Tensor gelu(const Tensor& x) {
  Tensor y = ops::gelu_forward(x);
  if (needs_graph({x})) {
    auto node = std::make_shared<GeluBackward>();
    node->x = x.detach();
    record(node, {x}, {y});
  }
  return y;
}

}  // namespace ft::autograd
