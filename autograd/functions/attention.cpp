#include "autograd/functions/attention.h"

#include "autograd/function.h"

namespace ft::autograd {
namespace {

struct QkvViews {
  Tensor q;     // (B, T, H, D), strides (T * W, W, D, 1), W = (H + 2 H_kv) D
  Tensor k, v;  // (B, T, H_kv, D), the same strides
};

// Views q, k, v of a (B, T, (H + 2 H_kv) D) buffer without copying it (a non-contiguous qkv is
// copied once).
QkvViews split_heads(const Tensor& qkv, int H, int H_kv) {
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / (H + 2 * H_kv);
  const Tensor flat = qkv.reshape({B, T, qkv.size(2)});  // a view unless qkv is not contiguous
  return {flat.slice(2, 0, H * D).view({B, T, H, D}), flat.slice(2, H * D, (H + H_kv) * D).view({B, T, H_kv, D}),
          flat.slice(2, (H + H_kv) * D, (H + 2 * H_kv) * D).view({B, T, H_kv, D})};
}

struct AttentionBackward : Node {
  Tensor qkv;                   // (B, T, (H + 2 H_kv) D)
  ops::AttentionForward fwd;    // out (B, T, H, D), lse (B, H, T), naive CUDA: probs (B, H, T, T)
  ops::AttentionOptions opts;   // with the forward's PhiloxState: the backward replays its mask
  int n_heads = 0, n_kv_heads = 0;
  bool use_flash = true;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor()};
    const Tensor dout = go[0].contiguous().view(fwd.out.shape());  // (B, T, H, D)
    const QkvViews in = split_heads(qkv, n_heads, n_kv_heads);
    Tensor dqkv = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());  // (B, T, (H + 2 H_kv) D)
    const QkvViews d = split_heads(dqkv, n_heads, n_kv_heads);  // every element of dqkv is written below
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

Tensor attention(const Tensor& qkv, int n_heads, const ops::AttentionOptions& opts, bool use_flash,
                 int n_kv_heads) {
  if (n_kv_heads == 0) n_kv_heads = n_heads;
  FT_CHECK_ARG(qkv.defined() && qkv.dim() == 3, "[attention] qkv must be (B, T, (n_heads + 2 n_kv_heads) D), got ",
               qkv.defined() ? str(qkv.shape()) : std::string("undefined"));
  FT_CHECK_ARG(n_heads >= 1 && n_kv_heads >= 1 && n_heads % n_kv_heads == 0, "[attention] n_heads = ", n_heads,
               " must be a multiple of n_kv_heads = ", n_kv_heads);
  const int64_t width = n_heads + 2 * static_cast<int64_t>(n_kv_heads);
  FT_CHECK_ARG(qkv.size(2) % width == 0, "[attention] qkv ", qkv.shape(), " has a last dim that is not (n_heads + ",
               "2 n_kv_heads) * D for n_heads = ", n_heads, ", n_kv_heads = ", n_kv_heads);
  const QkvViews in = split_heads(qkv, n_heads, n_kv_heads);
  ops::AttentionForward fwd = use_flash ? ops::flash_attention_forward(in.q, in.k, in.v, opts)
                                        : ops::naive_attention_forward(in.q, in.k, in.v, opts);
  Tensor y = fwd.out.view({qkv.size(0), qkv.size(1), n_heads * (qkv.size(2) / width)});  // (B, T, H D)
  if (needs_graph({qkv})) {
    auto node = std::make_shared<AttentionBackward>();
    node->qkv = qkv.detach();
    node->fwd = {fwd.out.detach(), fwd.lse, fwd.probs};
    node->opts = opts;
    node->n_heads = n_heads;
    node->n_kv_heads = n_kv_heads;
    node->use_flash = use_flash;
    record(node, {qkv}, {y});
  }
  return y;
}

}  // namespace ft::autograd
