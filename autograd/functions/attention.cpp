#include "autograd/functions/attention.h"

#include "autograd/function.h"

namespace ft::autograd {
namespace {

struct QkvViews {
  Tensor q, k, v;  // each (B, T, H, D), strides (T * 3C, 3C, D, 1)
};

// Views q, k, v of a (B, T, 3C) buffer without copying it (a non-contiguous qkv is copied once).
QkvViews split_heads(const Tensor& qkv, int H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  const Tensor parts = qkv.reshape({B, T, 3, H, C / H});  // (B, T, 3, H, D)
  return {parts.select(2, 0), parts.select(2, 1), parts.select(2, 2)};
}

struct AttentionBackward : Node {
  Tensor qkv;                   // (B, T, 3C)
  ops::AttentionForward fwd;    // out (B, T, H, D), lse (B, H, T), naive CUDA: probs (B, H, T, T)
  ops::AttentionOptions opts;   // with the forward's PhiloxState: the backward replays its mask
  int n_heads = 0;
  bool use_flash = true;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor()};
    const Tensor dout = go[0].contiguous().view(fwd.out.shape());  // (B, T, H, D)
    const QkvViews in = split_heads(qkv, n_heads);
    Tensor dqkv = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());  // (B, T, 3C)
    const QkvViews d = split_heads(dqkv, n_heads);  // every element of dqkv is written below
    if (use_flash)
      ops::flash_attention_backward(in.q, in.k, in.v, fwd.out, fwd.lse, dout, opts, d.q, d.k, d.v);
    else
      ops::naive_attention_backward(in.q, in.k, in.v, fwd, dout, opts, d.q, d.k, d.v);
    return {dqkv};
  }
  void release() override {
    qkv = Tensor();
    fwd = ops::AttentionForward();
  }
  const char* name() const override { return use_flash ? "FlashAttentionBackward" : "NaiveAttentionBackward"; }
};

}  // namespace

Tensor attention(const Tensor& qkv, int n_heads, const ops::AttentionOptions& opts, bool use_flash) {
  FT_CHECK_ARG(qkv.defined() && qkv.dim() == 3, "[attention] qkv must be (B, T, 3C), got ",
               qkv.defined() ? str(qkv.shape()) : std::string("undefined"));
  FT_CHECK_ARG(n_heads >= 1 && qkv.size(2) % (3 * static_cast<int64_t>(n_heads)) == 0, "[attention] qkv ",
               qkv.shape(), " has a last dim that is not 3 * n_heads * D for n_heads = ", n_heads);
  const QkvViews in = split_heads(qkv, n_heads);
  ops::AttentionForward fwd = use_flash ? ops::flash_attention_forward(in.q, in.k, in.v, opts)
                                        : ops::naive_attention_forward(in.q, in.k, in.v, opts);
  Tensor y = fwd.out.view({qkv.size(0), qkv.size(1), qkv.size(2) / 3});  // (B, T, C)
  if (needs_graph({qkv})) {
    auto node = std::make_shared<AttentionBackward>();
    node->qkv = qkv.detach();
    node->fwd = {fwd.out.detach(), fwd.lse, fwd.probs};
    node->opts = opts;
    node->n_heads = n_heads;
    node->use_flash = use_flash;
    record(node, {qkv}, {y});
  }
  return y;
}

}  // namespace ft::autograd
