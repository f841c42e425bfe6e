#include "autograd/function.h"

#include "autograd/accumulate_grad.h"

namespace ft::autograd {

bool needs_graph(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (requires_grad(t)) return true;
  return false;
}

namespace {
Edge edge_to(const Tensor& t) {
  if (!t.defined() || !requires_grad(t)) return {};
  auto meta = std::static_pointer_cast<AutogradMeta>(t.autograd_meta());
  if (meta->grad_fn) return Edge{meta->grad_fn, meta->output_nr};
  if (!meta->accumulator) {
    auto acc = std::make_shared<AccumulateGrad>();
    acc->leaf_meta = meta;
    acc->shape = t.shape();
    meta->accumulator = acc;
  }
  return Edge{meta->accumulator, 0};
}
}  // namespace

void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs) {
  node->next.clear();
  node->needs_grad.clear();
  for (const Tensor& t : inputs) {
    node->next.push_back(edge_to(t));
    node->needs_grad.push_back(node->next.back().node != nullptr);
  }
  node->num_outputs = static_cast<int>(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = static_cast<int>(i);
    outputs[i].set_autograd_meta(meta);
  }
}

}  // namespace ft::autograd
