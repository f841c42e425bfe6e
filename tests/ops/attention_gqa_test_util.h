// Helpers of the grouped-query attention tests (attention_gqa_test.cpp, attention_gqa_cuda_test.cu):
// inputs with H query and H_kv K/V heads, K/V heads repeated per group (the multi-head attention
// that grouped-query attention must equal), gradients summed per group, one forward + backward.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/attention.h"
#include "ops/elementwise.h"
#include "tests/test_util.h"

namespace ft::ops {

// q, dout (B, T, H, D), k, v (B, T, H_kv, D), contiguous, normal values from seeds seed .. seed + 3.
struct GqaInputs {
  Tensor q, k, v, dout;
};
inline GqaInputs gqa_inputs(int B, int T, int H, int H_kv, int D, DType dtype, Device dev, uint64_t seed) {
  using test::randn_tensor;
  return {randn_tensor({B, T, H, D}, seed, dtype, dev), randn_tensor({B, T, H_kv, D}, seed + 1, dtype, dev),
          randn_tensor({B, T, H_kv, D}, seed + 2, dtype, dev), randn_tensor({B, T, H, D}, seed + 3, dtype, dev)};
}

// (B, T, H_kv, D) -> (B, T, H, D): K/V head hk copied to query heads hk * group .. + group - 1.
inline Tensor repeat_kv_heads(const Tensor& kv, int H) {
  const int64_t B = kv.size(0), T = kv.size(1), H_kv = kv.size(2), D = kv.size(3), group = H / H_kv;
  const std::vector<double> x = kv.contiguous().to_doubles();
  std::vector<float> y(static_cast<size_t>(B * T * H * D));
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        y[static_cast<size_t>((bt * H + h) * D + d)] =
            static_cast<float>(x[static_cast<size_t>((bt * H_kv + h / group) * D + d)]);
  return cast(Tensor::from_floats(y, {B, T, H, D}, DType::F32), kv.dtype()).to(kv.device());
}

// (B, T, H, D) -> (B, T, H_kv, D): the sum over each group of `group` consecutive heads, added in
// Acc in head order (float: the order and precision of the CUDA and CPU group sums).
template <class Acc = double>
std::vector<double> sum_head_groups(const Tensor& g, int H_kv) {
  const int64_t B = g.size(0), T = g.size(1), H = g.size(2), D = g.size(3), group = H / H_kv;
  const std::vector<double> x = g.contiguous().to_doubles();
  std::vector<Acc> y(static_cast<size_t>(B * T * H_kv * D), Acc(0));
  for (int64_t bt = 0; bt < B * T; ++bt)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        y[static_cast<size_t>((bt * H_kv + h / group) * D + d)] +=
            static_cast<Acc>(x[static_cast<size_t>((bt * H + h) * D + d)]);
  return std::vector<double>(y.begin(), y.end());
}

struct Grads {
  AttentionForward fwd;
  Tensor dq, dk, dv;
};

// Forward and backward of flash or naive attention through the front door, on q's device.
inline Grads run_attention(bool flash, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                           const AttentionOptions& o) {
  Grads g;
  g.fwd = flash ? flash_attention_forward(q, k, v, o) : naive_attention_forward(q, k, v, o);
  g.dq = Tensor::empty(q.shape(), q.dtype(), q.device());
  g.dk = Tensor::empty(k.shape(), k.dtype(), k.device());
  g.dv = Tensor::empty(v.shape(), v.dtype(), v.device());
  if (flash) flash_attention_backward(q, k, v, g.fwd.out, g.fwd.lse, dout, o, g.dq, g.dk, g.dv);
  else naive_attention_backward(q, k, v, g.fwd, dout, o, g.dq, g.dk, g.dv);
  return g;
}

}  // namespace ft::ops
