// The sink node of a leaf: adds the incoming gradient into the leaf's .grad.
#pragma once

#include "autograd/node.h"

namespace ft::autograd {

struct AccumulateGrad : Node {
  // Weak: the graph must not keep parameters alive, the parameters keep their accumulator.
  std::weak_ptr<AutogradMetaBase> leaf_meta;
  Shape shape;

  std::vector<Tensor> backward(const std::vector<Tensor>& grad_outputs) override;
  const char* name() const override { return "AccumulateGrad"; }
};

}  // namespace ft::autograd
