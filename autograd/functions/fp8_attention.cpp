#include "autograd/functions/fp8_attention.h"

#include "autograd/function.h"
#include "ops/elementwise.h"

namespace ft::autograd {

Tensor fp8_attention(const Tensor& qkv, int n_heads, const ops::AttentionOptions& opts,
                     const ops::Fp8AttentionOptions& fp8) {
  FT_CHECK_ARG(qkv.defined() && qkv.dim() == 3, "[fp8_attention] qkv must be (B, T, 3C), got ",
               qkv.defined() ? str(qkv.shape()) : std::string("undefined"));
  FT_CHECK_ARG(n_heads >= 1 && qkv.size(2) % (3 * static_cast<int64_t>(n_heads)) == 0, "[fp8_attention] qkv ",
               qkv.shape(), " has a last dim that is not 3 * n_heads * D for n_heads = ", n_heads);
  FT_CHECK_ARG(!needs_graph({qkv}), "[fp8_attention] has no backward: it is an inference path (eval, sample); "
               "training runs the model's bf16 attention (drop --attention fp8, or compute under NoGradGuard)");
  const Tensor in = qkv.is_cuda() && qkv.dtype() != DType::BF16 ? ops::cast(qkv, DType::BF16) : qkv;
  const int64_t B = in.size(0), T = in.size(1), C = in.size(2) / 3;
  const Tensor parts = in.reshape({B, T, 3, n_heads, C / n_heads});  // (B, T, 3, H, D)
  const Tensor out = ops::fp8_attention_forward(parts.select(2, 0), parts.select(2, 1), parts.select(2, 2), opts, fp8);
  const Tensor y = out.view({B, T, C});  // (B, T, C)
  return y.dtype() == qkv.dtype() ? y : ops::cast(y, qkv.dtype());
}

}  // namespace ft::autograd
