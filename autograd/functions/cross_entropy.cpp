#include "autograd/functions/cross_entropy.h"

#include "autograd/function.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"

namespace ft::autograd {
namespace {

struct CrossEntropyBackward : Node {
  Tensor logits, targets, lse;  // logits (..., V); targets, lse (...)
  int32_t ignore_index = -1;
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined() || !needs_grad[0]) return {Tensor(), Tensor()};
    return {ops::cross_entropy_backward(go[0], logits, targets, lse, ignore_index), Tensor()};
  }
  void release() override { logits = targets = lse = Tensor(); }
  const char* name() const override { return "CrossEntropyBackward"; }
};

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index) {
  ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, targets, ignore_index);
  if (needs_graph({logits})) {
    auto node = std::make_shared<CrossEntropyBackward>();
    node->logits = logits.detach();
    node->targets = targets.detach();
    node->lse = out.lse;
    node->ignore_index = ignore_index;
    record(node, {logits, targets}, {out.loss});
  }
  return out.loss;
}

Tensor cross_entropy_mean(const Tensor& logits, const Tensor& targets, int32_t ignore_index, int64_t valid_rows) {
  if (valid_rows < 0) valid_rows = count_valid_rows(targets, ignore_index);
  return mean_over_rows(cross_entropy(logits, targets, ignore_index), valid_rows);
}

int64_t count_valid_rows(const Tensor& targets, int32_t ignore_index) {
  int64_t n = 0;
  for (int32_t t : ops::cast(targets, DType::I32).to_vector<int32_t>()) n += t != ignore_index;
  return n;
}

Tensor mean_over_rows(const Tensor& losses, int64_t valid_rows) {
  FT_CHECK_ARG(valid_rows >= 0, "[cross_entropy_mean] valid_rows must be >= 0, got ", valid_rows);
  Tensor total = losses;                          // (...)
  while (total.dim() > 0) total = sum(total, 0);  // ()
  return scale(total, 1.0 / static_cast<double>(valid_rows));
}

}  // namespace ft::autograd
