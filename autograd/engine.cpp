// The reverse pass: count each node's consumers, then run nodes whose every consumer has
// delivered its gradient (Kahn's algorithm over the reversed graph). A node's output gradients
// are summed as they arrive; its saved tensors are released right after it runs.
#include <unordered_map>
#include <vector>

#include "autograd/variable.h"
#include "ops/elementwise.h"

namespace ft::autograd {

void backward(const Tensor& root, const Tensor& grad_root) {
  FT_CHECK_ARG(requires_grad(root), "[backward] the tensor does not require a gradient (no input "
                                    "of the ops that made it was marked with set_requires_grad)");
  Tensor g = grad_root;
  if (!g.defined()) {
    FT_CHECK_ARG(root.numel() == 1, "[backward] a gradient must be given for non-scalar root ", root);
    g = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  }
  FT_CHECK_ARG(g.shape() == root.shape(), "[backward] gradient ", g, " does not match root ", root);

  auto root_meta = std::static_pointer_cast<AutogradMeta>(root.autograd_meta());
  std::shared_ptr<Node> start = root_meta->grad_fn;
  int start_output = root_meta->output_nr;
  if (!start) {  // the root is a leaf: its gradient is the seed itself
    NoGradGuard no_grad;
    if (root_meta->grad.defined()) ops::add_(root_meta->grad, g);
    else root_meta->grad = g.clone();
    return;
  }

  // Dependencies: how many edges point at each node from nodes reachable from the root.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack{start.get()};
  pending[start.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.node) continue;
      auto [it, fresh] = pending.try_emplace(e.node.get(), 0);
      it->second++;
      if (fresh) stack.push_back(e.node.get());
    }
  }

  NoGradGuard no_grad;  // backward formulas are not themselves recorded
  std::unordered_map<Node*, std::vector<Tensor>> grads;
  std::unordered_map<Node*, std::shared_ptr<Node>> keep_alive;
  grads[start.get()].resize(start->num_outputs);
  grads[start.get()][start_output] = g;
  keep_alive[start.get()] = start;
  std::vector<Node*> ready{start.get()};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    bool any = false;
    for (const Tensor& t : grads[n]) any = any || t.defined();
    // No gradient reached this node (e.g. only unused outputs): its inputs get none either.
    std::vector<Tensor> in_grads = any || n->delivered_in_place() ? n->backward(grads[n]) : std::vector<Tensor>();
    grads.erase(n);
    n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.node) continue;
      Node* m = e.node.get();
      keep_alive.emplace(m, e.node);
      if (i < in_grads.size() && in_grads[i].defined()) {
        auto& slot = grads[m];
        if (slot.empty()) slot.resize(m->num_outputs);
        Tensor& acc = slot[e.output_nr];
        acc = acc.defined() ? ops::add(acc, in_grads[i]) : in_grads[i];
      }
      if (--pending[m] == 0) {
        if (grads[m].empty()) grads[m].resize(m->num_outputs);
        ready.push_back(m);
      }
    }
    keep_alive.erase(n);
  }
}

}  // namespace ft::autograd
