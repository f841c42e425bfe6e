#include "autograd/functions/dropout.h"

#include "autograd/function.h"
#include "ops/dropout.h"

namespace ft::autograd {
namespace {

struct DropoutBackward : Node {
  float p = 0.f;
  PhiloxState state;  // the forward's: replays its mask
  std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) override {
    return {ops::dropout_backward(grad_outputs[0], p, state)};
  }
  const char* name() const override { return "DropoutBackward"; }
};

}  // namespace

Tensor dropout(const Tensor& x, float p, PhiloxState state) {
  Tensor y = ops::dropout(x, p, state);
  if (needs_graph({x})) {
    auto node = std::make_shared<DropoutBackward>();
    node->p = p;
    node->state = state;
    record(node, {x}, {y});
  }
  return y;
}

}  // namespace ft::autograd
