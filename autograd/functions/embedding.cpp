#include "autograd/functions/embedding.h"

#include "autograd/function.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"

namespace ft::autograd {
namespace {

struct EmbeddingBackward : Node {
  Tensor ids;  // (...)
  int64_t num_embeddings = 0;
  DType weight_dtype = DType::F32;
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined() || !needs_grad[1]) return {Tensor(), Tensor()};
    // A preset fp32 gradient (the trainer's arena) takes the scatter-add in place: no (V, C)
    // temporary, no rounding to the weight's dtype and back (autograd::direct_grad).
    if (go[0].dtype() != DType::F64) {
      const Tensor sink = direct_grad(*this, 1, {num_embeddings, go[0].size(-1)});
      if (sink.defined()) {
        ops::embedding_backward_(sink, go[0], ids);
        mark_delivered(*this, 1);
        return {Tensor(), Tensor()};
      }
    }
    return {Tensor(), ops::cast(ops::embedding_backward(go[0], ids, num_embeddings), weight_dtype)};
  }
  void release() override { ids = Tensor(); }
  const char* name() const override { return "EmbeddingBackward"; }
};

}  // namespace

Tensor embedding(const Tensor& ids, const Tensor& weight) {
  Tensor y = ops::embedding_forward(ids, weight);
  if (needs_graph({ids, weight})) {
    auto node = std::make_shared<EmbeddingBackward>();
    node->ids = ids.detach();
    node->num_embeddings = weight.size(0);
    node->weight_dtype = weight.dtype();
    record(node, {ids, weight}, {y});
  }
  return y;
}

}  // namespace ft::autograd
