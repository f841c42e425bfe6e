// Tensor-level autograd API: mark leaves, read gradients, run backward.
#pragma once

#include <functional>

#include "autograd/node.h"

namespace ft::autograd {

// Marks `t` as a leaf whose gradient is wanted (parameters, inputs of a gradient check).
void set_requires_grad(const Tensor& t, bool value = true);
bool requires_grad(const Tensor& t);
// The accumulated gradient of a leaf; undefined before backward reached it.
Tensor grad(const Tensor& t);
// Sets (or clears, with an undefined tensor) a leaf's gradient. Backward adds into a defined
// gradient in place, so a preset view into a flat buffer collects the gradient there
// (this is how the parameter arena gets all gradients in one buffer).
void set_grad(const Tensor& t, const Tensor& g);
// Calls `hook` (or stops calling it, with an empty function) each time a backward pass has finished
// adding into leaf `t`'s gradient: once per pass, after the leaf's last contribution, while the
// pass goes on (data parallelism launches gradient all-reduces from it). `t` must be a leaf that
// requires a gradient; the hook belongs to the leaf's accumulator node, made here if it is missing.
void set_grad_ready_hook(const Tensor& t, std::function<void()> hook);
// The node that produced `t`, or null for leaves and constants.
std::shared_ptr<Node> grad_fn(const Tensor& t);

// Reverse pass from `root`. `grad_root` defaults to ones for a one-element root. Nodes run in
// reverse topological order; each node's saved tensors are released after it runs, so the graph
// can be walked once (no retain_graph).
void backward(const Tensor& root, const Tensor& grad_root = Tensor());

// While alive, ops record no graph (evaluation, optimizer steps, in-place parameter updates).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
bool grad_mode_enabled();

}  // namespace ft::autograd
