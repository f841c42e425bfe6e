// The sink node of a leaf: adds the incoming gradient into the leaf's .grad.
#pragma once

#include <functional>

#include "autograd/node.h"

namespace ft::autograd {

struct AccumulateGrad : Node {
  // Weak: the graph must not keep parameters alive, the parameters keep their accumulator.
  std::weak_ptr<AutogradMetaBase> leaf_meta;
  Shape shape;
  // Called right after this leaf's gradient has been added, which the engine does once per
  // backward pass, after every contribution (a leaf used twice, like GPT-2's tied wte, has two
  // edges into this one node, and the engine runs a node only when all its edges have delivered).
  // Data parallelism launches a gradient bucket's all-reduce from it. Not called when no gradient
  // reached the leaf in that pass.
  std::function<void()> on_grad_ready;
  // Set by a consumer that added its share of the gradient straight into the leaf's .grad
  // (autograd::mark_delivered); the engine then runs this node even with no tensor to add.
  bool in_place = false;

  bool delivered_in_place() const override { return in_place; }

  std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) override;
  const char* name() const override { return "AccumulateGrad"; }
};

}  // namespace ft::autograd
