#include "autograd/functions/relu.h"

#include "autograd/function.h"
#include "ops/relu.h"

namespace ft::autograd {
namespace {

struct ReluBackward : Node {
  Tensor x;  // the mask x > 0 is recomputed from x
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor()};
    return {ops::relu_backward(go[0], x)};
  }
  void release() override { x = Tensor(); }
  const char* name() const override { return "ReluBackward"; }
};

}  // namespace

Tensor relu(const Tensor& x) {
  Tensor y = ops::relu_forward(x);
  if (needs_graph({x})) {
    auto node = std::make_shared<ReluBackward>();
    node->x = x.detach();
    record(node, {x}, {y});
  }
  return y;
}

}  // namespace ft::autograd
