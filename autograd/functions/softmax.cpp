#include "autograd/functions/softmax.h"

#include "autograd/function.h"
#include "ops/softmax.h"

namespace ft::autograd {
namespace {

struct SoftmaxBackward : Node {
  Tensor y;  // the forward's output: dx = y * (dy - rowsum(dy * y))
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor()};
    return {ops::softmax_backward(go[0], y)};
  }
  void release() override { y = Tensor(); }
  const char* name() const override { return "SoftmaxBackward"; }
};

}  // namespace

Tensor softmax(const Tensor& x) {
  Tensor y = ops::softmax_forward(x);
  if (needs_graph({x})) {
    auto node = std::make_shared<SoftmaxBackward>();
    node->y = y.detach();  // a handle without y's own graph slot: no cycle node -> y -> node
    record(node, {x}, {y});
  }
  return y;
}

}  // namespace ft::autograd
