#include "autograd/functions/linear_cross_entropy_mean.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "autograd/function.h"
#include "autograd/functions/cross_entropy.h"
#include "autograd/functions/linear_cross_entropy.h"
#include "autograd/functions/linear_grads.h"
#include "core/error.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"

namespace ft::autograd {
namespace {

// dlogits were made for an upstream gradient of hint; the products rescale them to go. Both
// factors stay on the device: no host read, and a graph replay reads their new values.
Tensor upstream_over_hint(const Tensor& go, const Tensor& hint) {
  return hint.defined() ? ops::scalar_ratio(go, hint) : go;
}

// One pass: the backward's products run in the backward, from the (..., Vp) dlogits the forward
// left in the logits' buffer.
struct LinearCrossEntropyMeanBackward : Node {
  Tensor x;       // (..., C)
  HeadWeights w;   // w in the products' two parts (see HeadWeights)
  Tensor full;    // (..., Vp): dlogits for an upstream gradient of `hint`, padding zero
  Tensor hint;    // (1) or undefined (1)
  int64_t vocab = 0;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor()};
    const HeadGrads g = head_backward_products(*this, x, w, full, vocab, upstream_over_hint(go[0], hint));
    return {g.dx, g.dw};
  }
  void release() override {
    x = full = hint = Tensor();
    w = HeadWeights();
  }
  const char* name() const override { return "LinearCrossEntropyMeanBackward"; }
};

// In chunks of rows: the forward already ran the products for an upstream gradient of `hint`;
// the backward only rescales them.
struct ChunkedLinearCrossEntropyMeanBackward : Node {
  Tensor dx;    // (..., C) in x's dtype, or undefined (x needs no gradient)
  Tensor dw;    // (V, C): f32 for half x on CUDA, else x's dtype; or undefined
  Tensor hint;  // (1) or undefined (1)
  DType w_dtype = DType::F32;

  std::vector<Tensor> backward(const std::vector<Tensor>& go) override {
    if (!go[0].defined()) return {Tensor(), Tensor()};
    const Tensor alpha = upstream_over_hint(go[0], hint);
    Tensor gx, gw;
    if (needs_grad[0] && dx.defined()) {
      gx = Tensor::empty(dx.shape(), dx.dtype(), dx.device());
      ops::add_scaled_(gx, dx, alpha, /*accumulate=*/false);
    }
    if (needs_grad[1] && dw.defined()) {
      // Into the preset fp32 gradient when there is one (the tied wte's arena view in training).
      const Tensor sink = dw.dtype() == DType::F32 ? direct_grad(*this, 1, dw.shape()) : Tensor();
      if (sink.defined()) {
        ops::add_scaled_(sink, dw, alpha);
        mark_delivered(*this, 1);
      } else {
        Tensor scaled = Tensor::empty(dw.shape(), dw.dtype(), dw.device());
        ops::add_scaled_(scaled, dw, alpha, /*accumulate=*/false);
        gw = ops::cast(scaled, w_dtype);  // the gradient in w's dtype, as the one-pass head gives it
      }
    }
    return {gx, gw};
  }
  void release() override { dx = dw = hint = Tensor(); }
  const char* name() const override { return "ChunkedLinearCrossEntropyMeanBackward"; }
};

std::atomic<int64_t> g_head_chunk_bytes{-1};  // set_head_chunk_bytes; -1: not set

// set_head_chunk_bytes, else FLASHTRAIN_HEAD_CHUNK_MIB (read once), else kHeadChunkMiB: the most
// logits bytes a chunk holds (0: never chunk).
int64_t head_chunk_bytes() {
  const int64_t set = g_head_chunk_bytes.load(std::memory_order_relaxed);
  if (set >= 0) return set;
  static const int64_t bytes = [] {
    const char* v = std::getenv("FLASHTRAIN_HEAD_CHUNK_MIB");
    if (v == nullptr || *v == '\0') return kHeadChunkMiB << 20;
    char* end = nullptr;
    const long long mib = std::strtoll(v, &end, 10);
    if (*end != '\0' || mib < 0)
      throw Error(str("FLASHTRAIN_HEAD_CHUNK_MIB=", v, ": expected a size in MiB (an integer >= 0; 0: no chunks)"));
    return static_cast<int64_t>(mib) << 20;
  }();
  return bytes;
}

// Rows a chunk takes: all of them when they fit one chunk's budget, else an even split into as few
// chunks as fit, rounded up to 64 rows (whole tiles of the products) past 64.
int64_t chunk_rows_for(int64_t rows, int64_t padded_vocab, int64_t elem_bytes, const HeadChunking& chunking) {
  if (chunking.rows > 0) return chunking.rows;
  const int64_t budget = chunking.budget_bytes >= 0 ? chunking.budget_bytes : head_chunk_bytes();
  const int64_t total = rows * padded_vocab * elem_bytes;
  if (budget == 0 || total <= budget) return rows;
  const int64_t chunks = (total + budget - 1) / budget;
  const int64_t even = (rows + chunks - 1) / chunks;
  return even > 64 ? (even + 63) / 64 * 64 : even;
}

}  // namespace

void set_head_chunk_bytes(int64_t bytes) { g_head_chunk_bytes = bytes < 0 ? -1 : bytes; }

LinearCrossEntropyMeanOut linear_cross_entropy_mean(const Tensor& x, const Tensor& w, const Tensor& targets,
                                                    int64_t valid_rows, const Tensor& grad_scale_hint,
                                                    int32_t ignore_index, const HeadChunking& chunking) {
  int64_t Vp = 0;
  const HeadWeights hw = head_weights("linear_cross_entropy_mean", x, w, &Vp);
  const int64_t V = w.size(0), C = w.size(1);
  if (valid_rows < 0) valid_rows = count_valid_rows(targets, ignore_index);
  FT_CHECK_ARG(valid_rows >= 0, "[linear_cross_entropy_mean] valid_rows must be >= 0, got ", valid_rows);
  FT_CHECK_ARG(chunking.rows >= 0 && chunking.budget_bytes >= -1, "[linear_cross_entropy_mean] chunking wants rows >= 0 "
               "(0: by the budget) and budget_bytes >= -1 (-1: the process's), got ", chunking.rows, " and ",
               chunking.budget_bytes);
  if (!needs_graph({x, w})) {
    const HeadProduct h = head_logits(x, hw, V, Vp);
    const Tensor losses = ops::cross_entropy_forward(h.logits, targets, ignore_index).loss;  // (...)
    return {mean_over_rows(losses, valid_rows), h.logits};
  }
  const double row_scale = 1.0 / static_cast<double>(valid_rows);
  const Tensor hint = grad_scale_hint.defined() ? grad_scale_hint.detach() : Tensor();  // what the node keeps
  const int64_t rows = x.numel() / C;
  const int64_t chunk = chunk_rows_for(rows, Vp, static_cast<int64_t>(dtype_size(x.dtype())), chunking);
  if (chunk >= rows) {
    // One pass: the per-row losses, and dlogits for an upstream gradient of the hint over the
    // logits' buffer (padding zeroed on CUDA, as the products need).
    const HeadProduct h = head_logits(x, hw, V, Vp);
    const Tensor losses = ops::cross_entropy_loss_and_grad_(h.logits, targets, grad_scale_hint, row_scale,
                                                            ignore_index);  // (...)
    // The same reduction as the two-pass head's (mean_over_rows; nothing here requires a gradient,
    // so it records nothing), hence the same loss bits from the same per-row losses.
    const Tensor loss = mean_over_rows(losses, valid_rows);  // ()
    auto node = std::make_shared<LinearCrossEntropyMeanBackward>();
    node->x = x.detach();
    node->w = hw.detached();
    node->full = h.full;
    node->hint = hint;
    node->vocab = V;
    record(node, {x, w}, {loss});
    return {loss, h.logits};
  }
  // In chunks: each chunk's logits become its dlogits (for an upstream of the hint) and feed the
  // products at once -- dx's rows, and dw summed over the chunks in fp32 -- so one chunk's logits
  // live at a time instead of every row's (1.6 GB for GPT-2-small at B T = 16384).
  const Tensor x2 = x.detach().view({rows, C});
  const Tensor t1 = targets.contiguous().view({rows});
  const bool want_dx = needs_graph({x}), want_dw = needs_graph({w});
  Tensor dx = want_dx ? Tensor::empty({rows, C}, x.dtype(), x.device()) : Tensor();
  const DType dw_dtype = is_half(x.dtype()) && x.is_cuda() ? DType::F32 : x.dtype();
  Tensor dw = want_dw ? Tensor::empty({V, C}, dw_dtype, x.device()) : Tensor();
  Tensor losses;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t r1 = std::min(rows, r0 + chunk);
    const Tensor xc = x2.slice(0, r0, r1);
    const HeadProduct h = head_logits(xc, hw, V, Vp);
    const Tensor lc =
        ops::cross_entropy_loss_and_grad_(h.logits, t1.slice(0, r0, r1), grad_scale_hint, row_scale, ignore_index);
    if (!losses.defined()) losses = Tensor::empty({rows}, lc.dtype(), lc.device());
    losses.slice(0, r0, r1).copy_(lc);
    if (want_dx) head_dx_into(h.full, hw, dx.slice(0, r0, r1));
    if (want_dw) weight_product_into(h.logits, xc, dw, /*accumulate=*/r0 > 0);
  }
  const Tensor loss = mean_over_rows(losses.view(targets.shape()), valid_rows);  // ()
  auto node = std::make_shared<ChunkedLinearCrossEntropyMeanBackward>();
  node->dx = want_dx ? dx.view(x.shape()) : Tensor();
  node->dw = dw;
  node->w_dtype = w.dtype();
  node->hint = hint;
  record(node, {x, w}, {loss});
  return {loss, Tensor()};
}

}  // namespace ft::autograd
