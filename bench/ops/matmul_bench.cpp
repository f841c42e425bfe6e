// ops::matmul against a plain cuBLASLt call of the same product, at GPT-2-small shapes in bf16
// (B*T = 16384): each linear layer's forward y = x W^T + b, its input gradient dX = dY W and its
// weight gradient dW += dY^T X (accumulating, as accumulation steps do; in bf16 and into an
// fp32 buffer), W stored (out, in).
// The bar: ours at >= 90% of the plain call's speed (the plain call's time over ours >= 0.9).
#include <cublasLt.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/ops/bench_registry.h"
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/matmul.h"

namespace ft::bench {
namespace {

// A cuBLASLt product written directly against the API in cuBLAS's own column-major terms
// (D = alpha op(A) op(B) + beta C, A m x k after op, leading dims given), bf16 in, bf16 or f32
// out, fp32 accumulation, the heuristic's first algorithm, the context's workspace. No caching.
class PlainLt {
 public:
  PlainLt(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n, int64_t k, const void* a,
          int64_t lda, const void* b, int64_t ldb, void* d, int64_t ldd, float beta, const void* bias,
          cudaDataType_t d_type = CUDA_R_16BF)
      : ctx_(cuda::context(0)), a_(a), b_(b), d_(d), beta_(beta) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    if (bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    const bool ta = op_a == CUBLAS_OP_T, tb = op_b == CUBLAS_OP_T;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, CUDA_R_16BF, ta ? k : m, ta ? m : k, lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_16BF, tb ? n : k, tb ? k : n, ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld_, d_type, m, n, ldd));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx_.workspace_bytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx_.blas_lt, desc_, la_, lb_, ld_, ld_, pref, 1, &result, &found));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    FT_CHECK_ARG(found > 0, "[matmul bench] no cuBLASLt algorithm");
    algo_ = result.algo;
  }
  ~PlainLt() {
    (void)cublasLtMatrixLayoutDestroy(ld_);
    (void)cublasLtMatrixLayoutDestroy(lb_);
    (void)cublasLtMatrixLayoutDestroy(la_);
    (void)cublasLtMatmulDescDestroy(desc_);
  }
  PlainLt(const PlainLt&) = delete;
  PlainLt& operator=(const PlainLt&) = delete;

  void run() const {
    const float alpha = 1.f;
    CUBLAS_CHECK(cublasLtMatmul(ctx_.blas_lt, desc_, &alpha, a_, la_, b_, lb_, &beta_, d_, ld_, d_, ld_, &algo_,
                                ctx_.workspace, ctx_.workspace_bytes, ctx_.stream));
  }

 private:
  const cuda::Context& ctx_;
  const void* a_;
  const void* b_;
  void* d_;
  float beta_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, ld_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

Tensor filled(const Shape& shape, double v) { return Tensor::full(shape, v, DType::BF16, Device::cuda()); }

// Registers "<label> cuBLASLt" (the baseline, no bar of its own) then "<label> ours".
void add_pair(std::vector<OpBench>& v, const std::string& label, double bytes, double flops,
              std::shared_ptr<PlainLt> plain, std::function<void()> ours) {
  const std::string base = label + " cuBLASLt";
  v.push_back({base, bytes, flops, [plain] { plain->run(); }, "copy", 0.0});
  v.push_back({label + " ours", bytes, flops, std::move(ours), base, 0.9});
}

struct Linear {
  const char* name;
  int64_t in, out;
  bool bias;
};

std::vector<OpBench> make() {
  constexpr int64_t kRows = 16384;  // B * T
  const std::vector<Linear> layers = {{"qkv 768->2304", 768, 2304, true},
                                      {"attn proj 768->768", 768, 768, true},
                                      {"fc 768->3072", 768, 3072, true},
                                      {"fc proj 3072->768", 3072, 768, true},
                                      {"lm head 768->50257", 768, 50257, false}};
  std::vector<OpBench> v;
  for (const Linear& l : layers) {
    const int64_t M = kRows, K = l.in, N = l.out;
    const Tensor x = filled({M, K}, 0.01), w = filled({N, K}, 0.01), y = filled({M, N}, 0.0);
    const Tensor dy = filled({M, N}, 0.01), dx = filled({M, K}, 0.0), dw = filled({N, K}, 0.0);
    const Tensor b = l.bias ? filled({N}, 0.01) : Tensor();
    const double flops = 2.0 * M * N * K;
    const double e = 2.0;  // bytes per bf16

    // Forward y (M, N) = x (M, K) . w^T. Column-major: y^T (N, M) = w (N, K as stored^T) . x^T.
    {
      auto plain = std::make_shared<PlainLt>(CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, w.data_ptr(), K, x.data_ptr(), K,
                                             y.data_ptr(), N, 0.f, l.bias ? b.data_ptr() : nullptr);
      ops::MatmulOptions o;
      o.trans_b = true;
      o.bias = b;
      add_pair(v, str("matmul ", l.name, " fwd"), e * (M * K + N * K + M * N), flops, plain,
               [x, w, y, o] { ops::matmul_out(x, w, y, o); });
    }
    // Input gradient dx (M, K) = dy (M, N) . w (N, K). Column-major: dx^T (K, M) = w^T . dy^T.
    {
      auto plain = std::make_shared<PlainLt>(CUBLAS_OP_N, CUBLAS_OP_N, K, M, N, w.data_ptr(), K, dy.data_ptr(), N,
                                             dx.data_ptr(), K, 0.f, nullptr);
      add_pair(v, str("matmul ", l.name, " dX"), e * (M * N + N * K + M * K), flops, plain,
               [dy, w, dx] { ops::matmul_out(dy, w, dx); });
    }
    // Weight gradient dw (N, K) += dy^T (N, M) . x (M, K). Column-major: dw^T (K, N) += x^T . dy.
    {
      auto plain = std::make_shared<PlainLt>(CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, x.data_ptr(), K, dy.data_ptr(), N,
                                             dw.data_ptr(), K, 1.f, nullptr);
      ops::MatmulOptions o;
      o.trans_a = true;
      add_pair(v, str("matmul ", l.name, " dW+="), e * (M * N + M * K + 2 * N * K), flops, plain,
               [dy, x, dw, o] { ops::matmul_out(dy, x, dw, o, /*accumulate=*/true); });
    }
    // The same, summed straight into an fp32 gradient buffer (bf16 operands, f32 output).
    {
      const Tensor dw32 = Tensor::zeros({N, K}, DType::F32, Device::cuda());
      auto plain = std::make_shared<PlainLt>(CUBLAS_OP_N, CUBLAS_OP_T, K, N, M, x.data_ptr(), K, dy.data_ptr(), N,
                                             dw32.data_ptr(), K, 1.f, nullptr, CUDA_R_32F);
      ops::MatmulOptions o;
      o.trans_a = true;
      add_pair(v, str("matmul ", l.name, " dW+= f32"), e * (M * N + M * K) + 4.0 * 2 * N * K, flops, plain,
               [dy, x, dw32, o] { ops::matmul_out(dy, x, dw32, o, /*accumulate=*/true); });
    }
  }
  return v;
}

const Registration reg("matmul", make);

}  // namespace
}  // namespace ft::bench
