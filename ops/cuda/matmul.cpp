// cuBLASLt host code for ops::matmul (no kernels of our own, hence .cpp).
//
// Row-major <-> column-major. cuBLASLt is column-major. A row-major (r, c) matrix with row stride
// ld is, byte for byte, a column-major (c, r) matrix with leading dimension ld: its transpose.
// So the row-major product D (m, n) = op(A) op(B) is issued as the column-major product
//   D^T (n, m) = op(B)^T (n, k) . op(A)^T (k, m)
// cuBLASLt's "A" is our b and its "B" is our a, with the same transpose flags, and its (m, n, k)
// is our (n, m, k). The bias epilogue adds a vector of length "rows of D" = our n to every
// column-major column = every one of our rows, which is the nn.Linear bias.
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/cuda/matmul.h"

namespace ft::cuda {
namespace {

cudaDataType_t lt_dtype(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: break;
  }
  throw Error(str("[matmul] CUDA takes f32, bf16 or f16, got ", t));
}

// Descriptors, layouts and the chosen algorithm of one geometry. Owns its cuBLASLt objects.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr;  // cuBLASLt's A: our b
  cublasLtMatrixLayout_t lt_b = nullptr;  // cuBLASLt's B: our a
  cublasLtMatrixLayout_t lt_d = nullptr;  // C and D: our d
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // destruction errors are ignored: nothing useful can be done with them here
    if (lt_d) (void)cublasLtMatrixLayoutDestroy(lt_d);
    if (lt_b) (void)cublasLtMatrixLayoutDestroy(lt_b);
    if (lt_a) (void)cublasLtMatrixLayoutDestroy(lt_a);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

// Largest power of two (<= 256) dividing the address and, for batches, the batch stride in
// bytes: what the heuristic may assume about every matrix it will be given.
uint32_t alignment_of(const void* p, int64_t batch_stride_bytes) {
  const uint64_t v = reinterpret_cast<uint64_t>(p) | static_cast<uint64_t>(batch_stride_bytes);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// A row-major (rows, cols) matrix with row stride ld, seen by cuBLASLt as column-major (cols, rows).
void make_layout(cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols,
                 int64_t ld, int64_t batch, int64_t batch_stride) {
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, static_cast<uint64_t>(cols),
                                          static_cast<uint64_t>(rows), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                  sizeof(count)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &batch_stride, sizeof(batch_stride)));
  }
}

using PlanKey = std::array<int64_t, 26>;

std::unique_ptr<Plan> build_plan(const Context& ctx, const MatmulParams& p, const MatmulGeometry& g,
                                 const std::array<uint32_t, 4>& align) {
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t type = lt_dtype(p.dtype), out_type = lt_dtype(p.out_dtype);
  const cublasComputeType_t compute =
      p.dtype == DType::F32 && p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, compute, CUDA_R_32F));  // fp32 alpha/beta
  const int32_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our b
  const int32_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (p.alpha_device) {
    // Before the heuristic: it sees the pointer mode (which may change the algorithm it picks).
    const int32_t mode = CUBLASLT_POINTER_MODE_DEVICE;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &mode, sizeof(mode)));
  }
  uint32_t epilogue = p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (p.epilogue == MatmulEpilogue::kGeluAux) epilogue = p.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  if (p.epilogue == MatmulEpilogue::kDGelu) epilogue = CUBLASLT_EPILOGUE_DGELU;
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                sizeof(epilogue)));
  if (p.bias) {
    // The bias has the output's dtype (D's): cuBLASLt's rule for non-fp8, non-integer products.
    // The heuristic reads the pointer's alignment; each call sets its own pointer.
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias,
                                                sizeof(p.bias)));
  }
  if (p.epilogue != MatmulEpilogue::kNone) {
    // The auxiliary matrix is laid out like D (column-major (n, m) to cuBLASLt), in D's dtype.
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux,
                                                sizeof(p.aux)));
    const int64_t ld_aux = p.ld_aux;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux,
                                                sizeof(ld_aux)));
  }
  // Stored row-major shapes: b is (n, k) when transposed else (k, n); a is (k, m) or (m, k).
  make_layout(&plan->lt_a, type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch, g.stride_b);
  make_layout(&plan->lt_b, type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch, g.stride_a);
  make_layout(&plan->lt_d, out_type, g.m, g.n, g.ldd, g.batch, g.stride_d);

  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  // The preference only lives through the heuristic query; destroy it on every path.
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, void (*)(cublasLtMatmulPreference_t)>
      pref_guard(pref, [](cublasLtMatmulPreference_t q) { (void)cublasLtMatmulPreferenceDestroy(q); });
  const uint64_t ws = ctx.workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i])));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.blas_lt, plan->desc, plan->lt_a, plan->lt_b, plan->lt_d,
                                              plan->lt_d, pref, 1, &result, &found));
  FT_CHECK_ARG(found > 0, "[matmul] cuBLASLt has no algorithm for ", p.dtype, " m=", g.m, " n=", g.n,
               " k=", g.k, " trans_a=", g.trans_a, " trans_b=", g.trans_b, " lda=", g.lda, " ldb=", g.ldb,
               " ldd=", g.ldd, " batch=", g.batch, " bias=", p.bias != nullptr, " alignments(a,b,d)=",
               align[1], ",", align[0], ",", align[3]);
  plan->algo = result.algo;
  return plan;
}

// Issues one cuBLASLt product (g.batch entries with strides that are all nonzero, or one matrix).
void run_lt(const MatmulParams& p, const MatmulGeometry& g, const void* a, const void* b, void* d,
            Stream stream) {
  static std::mutex mu;
  static auto* cache = new std::map<PlanKey, std::unique_ptr<Plan>>();  // lives for the process

  Context& ctx = context(p.device);
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
  const int64_t out_es = static_cast<int64_t>(dtype_size(p.out_dtype));
  const bool batched = g.batch > 1;
  // Order: cuBLASLt's A (our b), B (our a), C, D; then the bias.
  const std::array<uint32_t, 4> align = {alignment_of(b, batched ? g.stride_b * es : 0),
                                         alignment_of(a, batched ? g.stride_a * es : 0),
                                         alignment_of(d, batched ? g.stride_d * out_es : 0),
                                         alignment_of(d, batched ? g.stride_d * out_es : 0)};
  const PlanKey key = {p.device, static_cast<int64_t>(p.dtype), static_cast<int64_t>(p.out_dtype),
                       p.allow_tf32, p.bias != nullptr,
                       p.bias ? alignment_of(p.bias, 0) : 0, g.m, g.n, g.k, g.trans_a, g.trans_b,
                       g.lda, g.ldb, g.ldd, g.batch, g.stride_a, g.stride_b, g.stride_d,
                       align[0], align[1], align[2], 0, static_cast<int64_t>(p.epilogue),
                       p.aux ? alignment_of(p.aux, 0) : 0, p.ld_aux, p.alpha_device != nullptr};

  std::lock_guard<std::mutex> lock(mu);  // the cached descriptor's bias pointer is per call
  auto it = cache->find(key);
  if (it == cache->end()) it = cache->emplace(key, build_plan(ctx, p, g, align)).first;
  Plan& plan = *it->second;
  if (p.bias)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias,
                                                sizeof(p.bias)));
  if (p.epilogue != MatmulEpilogue::kNone)
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &p.aux,
                                                sizeof(p.aux)));
  // Host pointer mode: alpha and beta from the host, frozen at issue (and at graph capture).
  // Device pointer mode: both read from device memory when the product runs.
  const float alpha = static_cast<float>(g.alpha), beta = g.beta;
  const void* alpha_ptr = &alpha;
  const void* beta_ptr = &beta;
  if (p.alpha_device) {
    FT_ASSERT(beta == 0.f || beta == 1.f, "[matmul] device pointer mode takes beta 0 or 1, got ", beta);
    alpha_ptr = p.alpha_device;
    beta_ptr = matmul_device_beta(beta);
  }
  CUBLAS_CHECK(cublasLtMatmul(ctx.blas_lt, plan.desc, alpha_ptr, b, plan.lt_a, a, plan.lt_b, beta_ptr, d,
                              plan.lt_d, d, plan.lt_d, &plan.algo, ctx.workspace, ctx.workspace_bytes,
                              stream));
}

}  // namespace

void matmul(const MatmulParams& p, Stream stream) {
  const MatmulGeometry& g = p.g;
  FT_CHECK_ARG(p.epilogue == MatmulEpilogue::kNone || (g.batch == 1 && p.aux != nullptr),
               "[matmul] a GELU epilogue needs one (unbatched) product and an aux matrix");
  if (g.batch == 1 || (g.stride_a != 0 && g.stride_b != 0)) {
    run_lt(p, g, p.a, p.b, p.d, stream);
    return;
  }
  // One operand is broadcast over the batch (batch stride 0). The front-end folds the common
  // case (a (B, T, C) . w) into one 2-D product; the rest is issued entry by entry.
  MatmulGeometry one = g;
  one.batch = 1;
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
  const int64_t out_es = static_cast<int64_t>(dtype_size(p.out_dtype));
  for (int64_t i = 0; i < g.batch; ++i) {
    run_lt(p, one, static_cast<const char*>(p.a) + i * g.stride_a * es,
           static_cast<const char*>(p.b) + i * g.stride_b * es, static_cast<char*>(p.d) + i * g.stride_d * out_es,
           stream);
  }
}

}  // namespace ft::cuda
