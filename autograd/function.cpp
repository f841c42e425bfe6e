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

namespace {
AccumulateGrad* accumulator_of(const Node& node, size_t i) {
  if (i >= node.next.size() || !node.next[i].node) return nullptr;
  return dynamic_cast<AccumulateGrad*>(node.next[i].node.get());
}
}  // namespace

Tensor direct_grad(const Node& node, size_t i, const Shape& shape) {
  AccumulateGrad* acc = accumulator_of(node, i);
  if (!acc) return Tensor();
  auto meta = std::static_pointer_cast<AutogradMeta>(acc->leaf_meta.lock());
  if (!meta || !meta->grad.defined() || meta->grad.dtype() != DType::F32 || meta->grad.shape() != shape)
    return Tensor();
  return meta->grad;
}

void mark_delivered(const Node& node, size_t i) {
  AccumulateGrad* acc = accumulator_of(node, i);
  FT_ASSERT(acc, "[autograd] mark_delivered: input ", i, " of ", node.name(), " is not a leaf");
  acc->in_place = true;
}

}  // namespace ft::autograd
