#include "autograd/functions/gelu_mlp.h"

#include "autograd/function.h"
#include "autograd/functions/linear_grads.h"
#include "ops/matmul.h"

namespace ft::autograd {
namespace {

struct GeluMlpBackward : Node {
  Tensor x, w_fc, w_proj, pre, h;  // x (..., C), pre and h (..., F)
  bool has_b_fc = false, has_b_proj = false;

  // Inputs: 0 x, 1 w_fc, 2 b_fc, 3 w_proj, 4 b_proj.
  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    std::vector<Tensor> grads(5);
    const Tensor& g = go[0];  // (..., C')
    if (!g.defined()) return grads;
    if (needs_grad[3]) grads[3] = linear_weight_grad(*this, 3, h, g);
    if (has_b_proj && needs_grad[4]) grads[4] = linear_bias_grad(*this, 4, g);
    if (!(needs_grad[0] || needs_grad[1] || (has_b_fc && needs_grad[2]))) return grads;
    const Tensor da = ops::matmul_dgelu(g, w_proj, pre);  // (..., F): (g w_proj) * gelu'(pre)
    if (needs_grad[1]) grads[1] = linear_weight_grad(*this, 1, x, da);
    if (has_b_fc && needs_grad[2]) grads[2] = linear_bias_grad(*this, 2, da);
    if (needs_grad[0]) grads[0] = ops::matmul(da, w_fc);  // (..., C)
    return grads;
  }
  void release() override { x = w_fc = w_proj = pre = h = Tensor(); }
  const char* name() const override { return "GeluMlpBackward"; }
};

}  // namespace

Tensor gelu_mlp(const Tensor& x, const Tensor& w_fc, const Tensor& b_fc, const Tensor& w_proj, const Tensor& b_proj) {
  const ops::LinearGeluOut fc = ops::linear_gelu(x, w_fc, b_fc);  // (..., F)
  ops::MatmulOptions o;
  o.trans_b = true;
  o.bias = b_proj;
  Tensor y = ops::matmul(fc.h, w_proj, o);  // (..., C')
  const std::vector<Tensor> inputs = {x, w_fc, b_fc, w_proj, b_proj};
  if (needs_graph(inputs)) {
    auto node = std::make_shared<GeluMlpBackward>();
    node->x = x.detach();
    node->w_fc = w_fc.detach();
    node->w_proj = w_proj.detach();
    node->pre = fc.pre;
    node->h = fc.h;
    node->has_b_fc = b_fc.defined();
    node->has_b_proj = b_proj.defined();
    record(node, inputs, {y});
  }
  return y;
}

}  // namespace ft::autograd
