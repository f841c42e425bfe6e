#include "autograd/accumulate_grad.h"

#include "ops/elementwise.h"

namespace ft::autograd {

std::vector<Tensor> AccumulateGrad::backward(const std::vector<Tensor>& grad_outputs) {
  auto meta = std::static_pointer_cast<AutogradMeta>(leaf_meta.lock());
  const Tensor& g = grad_outputs.empty() ? Tensor() : grad_outputs[0];
  const bool direct = in_place;
  in_place = false;
  if (!meta || (!g.defined() && !direct)) return {};
  if (!g.defined()) {
    // Every contribution was added in place by the consumers (autograd::direct_grad).
  } else if (!meta->grad.defined()) {
    // Own a copy: g may alias a buffer another node still reads or will overwrite.
    meta->grad = g.clone();
  } else {
    // += so that gradient accumulation over micro-batches, and gradients preset as views into
    // a flat buffer, both work.
    ops::add_(meta->grad, ops::cast(g, meta->grad.dtype()));
  }
  if (on_grad_ready) on_grad_ready();
  return {};
}

}  // namespace ft::autograd
