#include "autograd/functions/linear_cross_entropy_mean.h"

#include "autograd/function.h"
#include "autograd/functions/cross_entropy.h"
#include "autograd/functions/linear_cross_entropy.h"
#include "ops/cross_entropy.h"

namespace ft::autograd {
namespace {

struct LinearCrossEntropyMeanBackward : Node {
  Tensor x;       // (..., C)
  HeadWeights w;   // w in the products' two parts (see HeadWeights)
  Tensor full;    // (..., Vp): dlogits for an upstream gradient of `hint`, padding zero
  Tensor hint;    // (1) or undefined (1)
  int64_t vocab = 0;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor()};
    // dlogits were made for an upstream gradient of hint; the products rescale them to go[0].
    // Both factors stay on the device: no host read, and a graph replay reads their new values.
    const Tensor alpha = hint.defined() ? ops::scalar_ratio(go[0], hint) : go[0];
    const HeadGrads g = head_backward_products(*this, x, w, full, vocab, alpha);
    return {g.dx, g.dw};
  }
  void release() override {
    x = full = hint = Tensor();
    w = HeadWeights();
  }
  const char* name() const override { return "LinearCrossEntropyMeanBackward"; }
};

}  // namespace

LinearCrossEntropyMeanOut linear_cross_entropy_mean(const Tensor& x, const Tensor& w, const Tensor& targets,
                                                    int64_t valid_rows, const Tensor& grad_scale_hint,
                                                    int32_t ignore_index) {
  const HeadProduct h = head_product("linear_cross_entropy_mean", x, w);
  if (valid_rows < 0) valid_rows = count_valid_rows(targets, ignore_index);
  FT_CHECK_ARG(valid_rows >= 0, "[linear_cross_entropy_mean] valid_rows must be >= 0, got ", valid_rows);
  if (!needs_graph({x, w})) {
    const Tensor losses = ops::cross_entropy_forward(h.logits, targets, ignore_index).loss;  // (...)
    return {mean_over_rows(losses, valid_rows), h.logits};
  }
  // One pass: the per-row losses, and dlogits for an upstream gradient of the hint over the
  // logits' buffer (padding zeroed on CUDA, as the products below need).
  const Tensor losses =
      ops::cross_entropy_loss_and_grad_(h.logits, targets, grad_scale_hint, 1.0 / static_cast<double>(valid_rows),
                                        ignore_index);  // (...)
  // The same reduction as the two-pass head's (mean_over_rows; nothing here requires a gradient,
  // so it records nothing), hence the same loss bits from the same per-row losses.
  const Tensor loss = mean_over_rows(losses, valid_rows);  // ()
  auto node = std::make_shared<LinearCrossEntropyMeanBackward>();
  node->x = x.detach();
  node->w = h.w.detached();
  node->full = h.full;
  node->hint = grad_scale_hint.defined() ? grad_scale_hint.detach() : Tensor();
  node->vocab = w.size(0);
  record(node, {x, w}, {loss});
  return {loss, h.logits};
}

}  // namespace ft::autograd
