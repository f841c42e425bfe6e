// Matrix products: plain, transposed and batched, with an optional bias on every output row.
//
//   MatmulOptions o;
//   o.trans_b = true;
//   o.bias = b;
//   y = ops::matmul(x, w, o);  // x (B*T, C) . w^T + b, w (out, C), b (out): nn.Linear
//   y = ops::matmul(x, w);     // x (B*T, C) . w, w (C, out)
//   s = ops::matmul(q, k, o);  // without bias: (B, T, D) . (B, T, D)^T -> (B, T, T)
//
// Operands are >= 2-D; the last two dims are the matrix, leading dims are batch dims. a and b
// either have the same batch dims or one of them is a plain matrix, which is then used for every
// batch entry (x (B, T, C) . w (C, out) -> (B, T, out)). The output has the batch dims, then
// (M, N). Dtypes: both operands and the output share one floating dtype (matmul_out may also
// write f32 from bf16/f16); bf16/f16 products accumulate in fp32. On CUDA f64 is rejected; on the
// CPU bf16/f16 are computed in f32.
//
// Layout: each operand's matrix must be row-major with a row stride >= its column count (a
// contiguous tensor, or a slice of columns such as q out of a fused qkv buffer) or the
// transpose of such a view (the trans flag then flips for free); its batch dims must collapse to
// one stride. Anything else throws: call .contiguous() first. K = 0 throws.
#pragma once

#include "core/tensor.h"

namespace ft {

// In namespace ft, not ft::ops, so that argument-dependent lookup does not make an unqualified
// matmul(a, b, opts) inside ft::autograd ambiguous between ops::matmul and autograd::matmul.
struct MatmulOptions {
  bool trans_a = false;  // use a^T: a is stored (..., K, M)
  bool trans_b = false;  // use b^T: b is stored (..., N, K)
  Tensor bias;           // optional (N), contiguous, the output's dtype; added to every output row
  float alpha = 1.f;     // scales the product (not the bias, not the accumulated output)
  // Optional: a one-element tensor on the operands' device (f32; f32 or f64 on the CPU) that
  // scales the product like alpha (which must then stay 1), read when the product runs rather
  // than when it is issued. On CUDA cuBLASLt takes alpha, and beta, by device pointer
  // (CUBLASLT_POINTER_MODE_DEVICE): a factor computed on the device needs no host read, and a
  // product captured in a CUDA graph reads the factor's current value at every replay. The GPT
  // head's loss scales its two backward products by upstream / hint this way
  // (autograd::linear_cross_entropy_mean).
  Tensor alpha_scale;
  // f32 only: let CUDA use TF32 tensor cores (10-bit mantissa inputs). Off by default so f32
  // results stay close to the CPU reference.
  bool allow_tf32 = false;
  // x w^T with a plain 2-D w and no bias (an nn.Linear without bias, the GPT head) on CUDA, when N
  // columns are not a multiple of 16 bytes: the product runs over N padded to aligned_cols(N)
  // against a zero-padded copy of w (pad_rows), and the output is the first N columns of that
  // (a view with padded rows); its backward computes dx over the padded N the same way, so no
  // operand has an odd contiguous dimension. Other products ignore it. cuBLASLt otherwise picks
  // Turing-era align-1 kernels: GPT-2's head (V = 50257) took some 30 ms of a 64 ms training step
  // on an H100 in three such products (Nsight Compute, session 9). cross_entropy_backward keeps
  // the padded row stride.
  bool align_rows = false;
};

}  // namespace ft

namespace ft::ops {

using ft::MatmulOptions;

// alpha * op(a) op(b) + bias, a new contiguous tensor.
Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& opts = {});

// The same product written into `out` (shape batch + (M, N), unit column stride, any row stride
// >= N). accumulate = true adds to what `out` holds (beta = 1): weight gradients of accumulation
// steps sum in place without a temporary. `out` has the dtype of a and b, or f32 when they are
// bf16/f16: bf16 activations and weights then accumulate their weight gradient straight into an
// fp32 gradient buffer, with no bf16 rounding of the sum. The bias has out's dtype. `out` must
// not overlap a or b.
void matmul_out(const Tensor& a, const Tensor& b, const Tensor& out, const MatmulOptions& opts = {},
                bool accumulate = false);

// align_rows: n rounded up so that n elements of `dtype` are a multiple of 16 bytes.
int64_t aligned_cols(int64_t n, DType dtype);
// Whether align_rows applies to op(a) op(b) with these options: x w^T, w 2-D, no bias, on CUDA,
// N = b.size(0) not already aligned.
bool align_rows_applies(const Tensor& a, const Tensor& b, const MatmulOptions& opts);
// A (rows, C) copy of the matrix w (R, C), R <= rows, with zero rows after R (align_rows).
Tensor pad_rows(const Tensor& w, int64_t rows);

// An MLP's c_fc -> GELU -> c_proj without separate GELU passes over its (rows, d_ff)
// activations: on CUDA the GELU (tanh form, ops/gelu.h) and its derivative run in cuBLASLt's
// epilogues (when N's rows are 16-byte multiples); otherwise, and on the CPU, matmul and
// gelu_forward / gelu_backward compute the same. Measured on
// an H100 at 16384 x 768 -> 3072 (bf16): the epilogue adds 0.039 ms to the c_fc product and
// 0.042 ms to c_proj's dx product, against 0.068 and 0.098 ms for the GELU kernels they replace.
struct LinearGeluOut {
  Tensor h;    // (..., N) gelu(pre)
  Tensor pre;  // (..., N) x w^T + bias: what the backward needs
};
// x (..., K) a stack of rows, w (N, K), bias (N) or undefined, all one dtype.
LinearGeluOut linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias);
// (dy w) * gelu'(pre): dy (..., N') a stack of rows, w (N', N), pre (..., N) from linear_gelu.
Tensor matmul_dgelu(const Tensor& dy, const Tensor& w, const Tensor& pre);

}  // namespace ft::ops
