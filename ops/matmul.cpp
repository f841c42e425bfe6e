#include "ops/matmul.h"

#include <algorithm>

#include "ops/cpu/matmul.h"
#include "ops/cuda/matmul.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/gelu.h"

namespace ft::ops {
namespace {

// How the kernels see one operand's matrix (its last two dims).
struct MatrixLayout {
  bool ok = false;
  bool flipped = false;  // stored as the transpose of a row-major matrix: the trans flag flips
  int64_t ld = 0;        // row stride of the stored row-major matrix
};

MatrixLayout matrix_layout(const Tensor& t) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.stride(-2), cs = t.stride(-1);
  MatrixLayout l;
  // Row-major (rows, cols) with row stride >= cols. Strides of size-1 dims do not matter.
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
    l.ok = true;
    l.ld = rows == 1 ? std::max<int64_t>(cols, 1) : std::max<int64_t>(rs, 1);
    return l;
  }
  // Column-major: the transpose of a row-major (cols, rows) matrix with row stride cs.
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
    l.ok = true;
    l.flipped = true;
    l.ld = cols == 1 ? std::max<int64_t>(rows, 1) : std::max<int64_t>(cs, 1);
  }
  return l;
}

// The one element stride that steps through all batch entries (the dims before the last two,
// flattened), or -1 when those dims do not collapse to one stride. 0 for no batch dims.
int64_t batch_stride(const Tensor& t) {
  int64_t stride = 0, expected = -1;
  for (int i = t.dim() - 3; i >= 0; --i) {
    if (t.size(i) == 1) continue;
    if (expected < 0) {
      stride = t.stride(i);
      expected = stride * t.size(i);
    } else if (t.stride(i) != expected) {
      return -1;
    } else {
      expected *= t.size(i);
    }
  }
  return stride;
}

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

void check_layout(const char* name, const Tensor& t) {
  FT_CHECK_ARG(matrix_layout(t).ok && batch_stride(t) >= 0, "[matmul] ", name, " with shape ", t.shape(),
               " has strides ", t.strides(),
               ": need a row-major matrix with row stride >= its columns (or the transpose of one) "
               "and batch dims that collapse to one stride; call .contiguous() first");
}

// Validates the operands (for an output of `out_dtype`) and returns the output's shape: batch
// dims, then (M, N).
Shape check_and_shape(const Tensor& a, const Tensor& b, const MatmulOptions& o, DType out_dtype) {
  FT_CHECK_ARG(a.defined() && b.defined(), "[matmul] an operand is undefined");
  FT_CHECK_ARG(a.dim() >= 2 && b.dim() >= 2, "[matmul] operands must be at least 2-D, got a ", a.shape(),
               " and b ", b.shape());
  FT_CHECK_ARG(a.dtype() == b.dtype(), "[matmul] dtypes differ: a ", a.dtype(), ", b ", b.dtype());
  FT_CHECK_ARG(is_floating(a.dtype()), "[matmul] needs a floating dtype, got ", a.dtype());
  FT_CHECK_ARG(a.device() == b.device(), "[matmul] devices differ: a on ", a.device(), ", b on ", b.device());
  FT_CHECK_ARG(!(a.is_cuda() && a.dtype() == DType::F64), "[matmul] f64 is CPU-only, a and b are on ",
               a.device());
  const int64_t m = o.trans_a ? a.size(-1) : a.size(-2);
  const int64_t ka = o.trans_a ? a.size(-2) : a.size(-1);
  const int64_t kb = o.trans_b ? b.size(-1) : b.size(-2);
  const int64_t n = o.trans_b ? b.size(-2) : b.size(-1);
  FT_CHECK_ARG(ka == kb, "[matmul] inner dims differ: op(a) is (", m, ", ", ka, ") from a ", a.shape(),
               " trans_a=", o.trans_a, ", op(b) is (", kb, ", ", n, ") from b ", b.shape(), " trans_b=", o.trans_b);
  FT_CHECK_ARG(ka > 0, "[matmul] inner dim K is 0 (a ", a.shape(), ", b ", b.shape(), ")");
  const Shape ba = batch_dims(a), bb = batch_dims(b);
  FT_CHECK_ARG(ba == bb || ba.empty() || bb.empty(), "[matmul] batch dims differ: a ", a.shape(), ", b ",
               b.shape(), " (they must match, or one operand must be a plain matrix)");
  check_layout("a", a);
  check_layout("b", b);
  if (o.bias.defined()) {
    const Tensor& c = o.bias;
    FT_CHECK_ARG(c.dim() == 1 && c.size(0) == n, "[matmul] bias ", c.shape(), " must be (", n,
                 ") for output columns N=", n);
    FT_CHECK_ARG(c.dtype() == out_dtype, "[matmul] bias is ", c.dtype(), ", the output is ", out_dtype);
    FT_CHECK_ARG(c.device() == a.device(), "[matmul] bias on ", c.device(), ", operands on ", a.device());
    FT_CHECK_ARG(c.stride(0) == 1 || n == 1, "[matmul] bias must be contiguous, has stride ", c.stride(0));
  }
  if (o.alpha_scale.defined()) {
    const Tensor& s = o.alpha_scale;
    FT_CHECK_ARG(s.numel() == 1 && s.device() == a.device() &&
                     (s.dtype() == DType::F32 || (s.dtype() == DType::F64 && !a.is_cuda())),
                 "[matmul] alpha_scale must be one f32 element (f64 also on the CPU) on ", a.device(), ", got ",
                 s.shape(), " ", s.dtype(), " on ", s.device());
    FT_CHECK_ARG(o.alpha == 1.f, "[matmul] alpha_scale replaces alpha, which must stay 1, got ", o.alpha);
  }
  Shape out = ba.empty() ? bb : ba;
  out.push_back(m);
  out.push_back(n);
  return out;
}

// The kernels' geometry for validated operands and an output of the right shape.
MatmulGeometry geometry(const Tensor& a, const Tensor& b, const Tensor& out, const MatmulOptions& o,
                        float beta) {
  MatmulGeometry g;
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b), ld = matrix_layout(out);
  g.m = out.size(-2);
  g.n = out.size(-1);
  g.k = o.trans_a ? a.size(-2) : a.size(-1);
  g.trans_a = o.trans_a != la.flipped;
  g.trans_b = o.trans_b != lb.flipped;
  g.lda = la.ld;
  g.ldb = lb.ld;
  g.ldd = ld.ld;
  g.batch = shape_numel(batch_dims(out));
  g.stride_a = a.dim() > 2 ? batch_stride(a) : 0;
  g.stride_b = b.dim() > 2 ? batch_stride(b) : 0;
  g.stride_d = batch_stride(out);
  g.alpha = o.alpha;
  g.beta = beta;
  // x (B, T, C) . w is one (B*T, C) . w product when x's rows (and the output's) run on with one
  // stride across the batch: one large GEMM instead of B small ones.
  if (g.batch > 1 && g.stride_b == 0 && !g.trans_a && g.stride_a == g.m * g.lda && g.stride_d == g.m * g.ldd) {
    g.m *= g.batch;
    g.batch = 1;
    g.stride_a = g.stride_d = 0;
  }
  return g;
}

// epilogue/aux: CUDA only (the GELU front-ends below do the CPU's in separate passes).
void run(const Tensor& a, const Tensor& b, const Tensor& out, const MatmulOptions& o, float beta,
         cuda::MatmulEpilogue epilogue = cuda::MatmulEpilogue::kNone, const Tensor& aux = Tensor()) {
  if (out.numel() == 0) return;
  FT_ASSERT(epilogue == cuda::MatmulEpilogue::kNone || a.is_cuda(), "[matmul] epilogues are CUDA-only");
  dispatch(
      a.device(),
      [&] {
        if (is_half(a.dtype())) {  // the CPU computes half dtypes in f32 and rounds the result
          MatmulOptions of = o;
          if (o.bias.defined()) of.bias = cast(o.bias, DType::F32);
          if (out.dtype() == DType::F32) {  // fp32 output: nothing to round
            run(cast(a, DType::F32), cast(b, DType::F32), out, of, beta);
            return;
          }
          Tensor out_f = beta != 0.f ? cast(out, DType::F32).clone() : Tensor::empty(out.shape(), DType::F32);
          run(cast(a, DType::F32), cast(b, DType::F32), out_f, of, beta);
          Tensor(out).copy_(cast(out_f, out.dtype()));
          return;
        }
        MatmulGeometry g = geometry(a, b, out, o, beta);
        if (o.alpha_scale.defined()) g.alpha = o.alpha_scale.to_doubles()[0];  // host memory: no sync
        dispatch_cpu_float(a.dtype(), "matmul", [&](auto tag) {
          using T = decltype(tag);
          cpu::matmul<T>(a.data<T>(), b.data<T>(), out.data<T>(), o.bias.defined() ? o.bias.data<T>() : nullptr, g);
        });
      },
      [&](Stream s) {
        cuda::MatmulParams p;
        p.a = a.data_ptr();
        p.b = b.data_ptr();
        p.d = out.data_ptr();
        p.bias = o.bias.defined() ? o.bias.data_ptr() : nullptr;
        p.dtype = a.dtype();
        p.out_dtype = out.dtype();
        p.g = geometry(a, b, out, o, beta);
        if (o.alpha_scale.defined()) p.alpha_device = o.alpha_scale.data<float>();
        p.epilogue = epilogue;
        if (aux.defined()) {
          p.aux = aux.data_ptr();
          p.ld_aux = matrix_layout(aux).ld;
        }
        p.allow_tf32 = o.allow_tf32;
        p.device = a.device().index;
        cuda::matmul(p, s);
      });
}

}  // namespace

int64_t aligned_cols(int64_t n, DType dtype) {
  const int64_t per16 = 16 / static_cast<int64_t>(dtype_size(dtype));
  return (n + per16 - 1) / per16 * per16;
}

bool align_rows_applies(const Tensor& a, const Tensor& b, const MatmulOptions& opts) {
  return opts.align_rows && a.is_cuda() && opts.trans_b && !opts.trans_a && b.dim() == 2 &&
         !opts.bias.defined() && aligned_cols(b.size(0), a.dtype()) != b.size(0);
}

Tensor pad_rows(const Tensor& w, int64_t rows) {
  FT_CHECK_ARG(w.dim() == 2 && rows >= w.size(0), "[matmul] pad_rows: ", w.shape(), " to ", rows, " rows");
  Tensor out = Tensor::zeros({rows, w.size(1)}, w.dtype(), w.device());
  out.slice(0, 0, w.size(0)).copy_(w);
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& opts) {
  const Shape shape = check_and_shape(a, b, opts, a.dtype());
  if (align_rows_applies(a, b, opts)) {
    // x w^T over the padded N: w's extra rows are zeros, so are the extra output columns.
    const int64_t n = shape.back();
    Shape padded = shape;
    padded.back() = aligned_cols(n, a.dtype());
    Tensor out = Tensor::empty(padded, a.dtype(), a.device());
    run(a, pad_rows(b, padded.back()), out, opts, 0.f);
    return out.slice(-1, 0, n);
  }
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  run(a, b, out, opts, 0.f);
  return out;
}

void matmul_out(const Tensor& a, const Tensor& b, const Tensor& out, const MatmulOptions& opts, bool accumulate) {
  FT_CHECK_ARG(out.defined(), "[matmul] the output tensor is undefined");
  const Shape shape = check_and_shape(a, b, opts, out.dtype());
  FT_CHECK_ARG(out.shape() == shape, "[matmul] output has shape ", out.shape(), ", the product of a ", a.shape(),
               " and b ", b.shape(), " is ", shape);
  FT_CHECK_ARG(out.dtype() == a.dtype() || (is_half(a.dtype()) && out.dtype() == DType::F32), "[matmul] output is ",
               out.dtype(), ", operands are ", a.dtype(), " (the output takes their dtype, or f32 for bf16/f16)");
  FT_CHECK_ARG(out.device() == a.device(), "[matmul] output on ", out.device(), ", operands on ", a.device());
  const MatrixLayout l = matrix_layout(out);
  FT_CHECK_ARG(l.ok && !l.flipped && batch_stride(out) >= 0, "[matmul] output with shape ", out.shape(),
               " has strides ", out.strides(),
               ": need unit column stride, a row stride >= its columns and collapsible batch dims");
  run(a, b, out, opts, accumulate ? 1.f : 0.f);
}

namespace {

// The (M, K) view of a stack of rows x (..., K).
Tensor rows_2d(const char* op, const Tensor& x) {
  FT_CHECK_ARG(x.dim() >= 2 && rows_collapse(x), "[", op, "] ", x.shape(), " with strides ", x.strides(),
               " must be a stack of rows (..., K): call .contiguous() first");
  return x.view({-1, x.size(-1)});
}

// Whether the GELU epilogues take this product: on CUDA, with the auxiliary matrix's rows 16-byte
// aligned (cuBLASLt's requirement for its leading dimension); otherwise matmul and the GELU
// kernels compute the same in separate passes.
bool gelu_epilogue_applies(const Tensor& x, int64_t n) {
  return x.is_cuda() && n * static_cast<int64_t>(dtype_size(x.dtype())) % 16 == 0;
}

}  // namespace

LinearGeluOut linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias) {
  MatmulOptions o;
  o.trans_b = true;
  o.bias = bias;
  const Shape shape = check_and_shape(x, w, o, x.dtype());  // (..., N), validates w and bias
  if (!gelu_epilogue_applies(x, shape.back())) {
    const Tensor pre = matmul(x, w, o);
    return {gelu_forward(pre), pre};
  }
  const Tensor x2 = rows_2d("linear_gelu", x);
  LinearGeluOut out{Tensor::empty(shape, x.dtype(), x.device()), Tensor::empty(shape, x.dtype(), x.device())};
  const Tensor h2 = out.h.view({-1, shape.back()}), pre2 = out.pre.view({-1, shape.back()});
  run(x2, w, h2, o, 0.f, cuda::MatmulEpilogue::kGeluAux, pre2);
  return out;
}

Tensor matmul_dgelu(const Tensor& dy, const Tensor& w, const Tensor& pre) {
  const Shape shape = check_and_shape(dy, w, MatmulOptions(), dy.dtype());  // (..., N)
  FT_CHECK_ARG(pre.shape() == shape && pre.dtype() == dy.dtype() && pre.device() == dy.device(), "[matmul_dgelu] pre ",
               pre.shape(), " ", pre.dtype(), " must be the product's shape ", shape, " and dy's dtype ", dy.dtype());
  if (!gelu_epilogue_applies(dy, shape.back())) return gelu_backward(matmul(dy, w), pre);
  const Tensor dy2 = rows_2d("matmul_dgelu", dy), pre2 = rows_2d("matmul_dgelu", pre);
  Tensor out = Tensor::empty(shape, dy.dtype(), dy.device());
  run(dy2, w, out.view({-1, shape.back()}), MatmulOptions(), 0.f, cuda::MatmulEpilogue::kDGelu, pre2);
  return out;
}

}  // namespace ft::ops
