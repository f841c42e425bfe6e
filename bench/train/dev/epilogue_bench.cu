// Standalone cuBLASLt micro-benchmark behind bench/train/NOTES.md (session 10): the GPT-2 MLP's
// products with GELU_AUX_BIAS / DGELU / DGELU_BGRAD epilogues against plain ones, and the head's dW
// over V = 50257 against a padded 50304. Build and run on the GPU machine:
//   nvcc -std=c++17 -O2 -arch=sm_90 bench/train/dev/epilogue_bench.cu -lcublasLt -o /tmp/epilogue_bench && /tmp/epilogue_bench
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <functional>
#include <tuple>
#define CK(x) do { auto e = (x); if (e != 0) { printf("err %d at %s:%d\n", (int)e, __FILE__, __LINE__); exit(1);} } while (0)

cublasLtHandle_t lt; void* ws; size_t wsb = 64 << 20;

float time_it(std::function<void()> f) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 30; ++i) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}

// D (m x n col-major, ld m) = op(A) (m x k) op(B) (k x n), epilogue ep.
struct Run {
  cublasLtMatmulDesc_t d; cublasLtMatrixLayout_t la, lb, lc, ld_; cublasLtMatmulAlgo_t algo; bool ok = false;
};
Run make(int m, int n, int k, bool ta, bool tb, int lda, int ldb, int ldd, cudaDataType_t dt, cudaDataType_t ot,
         cublasLtEpilogue_t ep, void* bias, cudaDataType_t bias_t, void* aux, int ldaux) {
  Run r; CK(cublasLtMatmulDescCreate(&r.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  int opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_TRANSA, &opa, 4));
  CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_TRANSB, &opb, 4));
  CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
  if (bias) { CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, 8));
              CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t, 4)); }
  if (aux) { CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, 8));
             int64_t l = ldaux; CK(cublasLtMatmulDescSetAttribute(r.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &l, 8)); }
  CK(cublasLtMatrixLayoutCreate(&r.la, dt, ta ? k : m, ta ? m : k, lda));
  CK(cublasLtMatrixLayoutCreate(&r.lb, dt, tb ? n : k, tb ? k : n, ldb));
  CK(cublasLtMatrixLayoutCreate(&r.lc, ot, m, n, ldd));
  cublasLtMatmulPreference_t p; CK(cublasLtMatmulPreferenceCreate(&p));
  CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, 8));
  cublasLtMatmulHeuristicResult_t res; int found = 0;
  auto st = cublasLtMatmulAlgoGetHeuristic(lt, r.d, r.la, r.lb, r.lc, r.lc, p, 1, &res, &found);
  if (st != 0 || !found) { printf("  no algo (status %d)\n", (int)st); return r; }
  r.algo = res.algo; r.ok = true; return r;
}
void go(Run& r, void* A, void* B, void* D, float beta) {
  float alpha = 1.f;
  CK(cublasLtMatmul(lt, r.d, &alpha, A, r.la, B, r.lb, &beta, D, r.lc, D, r.lc, &r.algo, ws, wsb, 0));
}

int main() {
  CK(cublasLtCreate(&lt)); CK(cudaMalloc(&ws, wsb));
  const int M = 16384, C = 768, F = 3072, V = 50257, Vp = 50304;
  void *x, *w1, *b1, *h, *pre, *dy, *w2, *dh, *db, *dl, *dw32;
  CK(cudaMalloc(&x, (size_t)M * C * 2)); CK(cudaMalloc(&w1, (size_t)F * C * 2)); CK(cudaMalloc(&b1, F * 4));
  CK(cudaMalloc(&h, (size_t)M * F * 2)); CK(cudaMalloc(&pre, (size_t)M * F * 2)); CK(cudaMalloc(&dy, (size_t)M * C * 2));
  CK(cudaMalloc(&w2, (size_t)C * F * 2)); CK(cudaMalloc(&dh, (size_t)M * F * 2)); CK(cudaMalloc(&db, F * 4));
  CK(cudaMalloc(&dl, (size_t)M * Vp * 2)); CK(cudaMalloc(&dw32, (size_t)Vp * C * 4));
  // random-ish fill
  for (void* p : {x, w1, dy, w2, dl}) { size_t n = p == dl ? (size_t)M * Vp : p == x || p == dy ? (size_t)M * C : (size_t)F * C;
    std::vector<__nv_bfloat16> v(n); for (size_t i = 0; i < n; ++i) v[i] = __float2bfloat16(((i * 2654435761u) % 1000) / 1000.f - 0.5f);
    CK(cudaMemcpy(p, v.data(), n * 2, cudaMemcpyHostToDevice)); }
  cudaMemset(b1, 0, F * 4);
  // fc forward: D (F x M) = W1^T-as-stored ... W1 stored (F, C) row-major = col-major (C, F): op T, lda C.
  for (auto [name, ep, aux] : std::vector<std::tuple<const char*, cublasLtEpilogue_t, bool>>{
         {"fc fwd BIAS", CUBLASLT_EPILOGUE_BIAS, false}, {"fc fwd GELU_AUX_BIAS", CUBLASLT_EPILOGUE_GELU_AUX_BIAS, true},
         {"fc fwd GELU_BIAS", CUBLASLT_EPILOGUE_GELU_BIAS, false}}) {
    Run r = make(F, M, C, true, false, C, C, F, CUDA_R_16BF, CUDA_R_16BF, ep, b1, CUDA_R_16BF, aux ? pre : nullptr, F);
    if (r.ok) printf("%-28s %.3f ms\n", name, time_it([&] { go(r, w1, x, h, 0.f); }));
  }
  // proj backward dX: dh (F x M col-major) = W2 (row-major (C,F) = col-major (F,C), op N, ld F) . dy^T (col-major (C,M), ld C)
  for (auto [name, ep, aux, bg] : std::vector<std::tuple<const char*, cublasLtEpilogue_t, bool, bool>>{
         {"proj bwd dX plain", CUBLASLT_EPILOGUE_DEFAULT, false, false}, {"proj bwd dX DGELU", CUBLASLT_EPILOGUE_DGELU, true, false},
         {"proj bwd dX DGELU_BGRAD", CUBLASLT_EPILOGUE_DGELU_BGRAD, true, true}}) {
    for (cudaDataType_t bt : {CUDA_R_16BF, CUDA_R_32F}) {
      if (!bg && bt == CUDA_R_32F) continue;
      Run r = make(F, M, C, false, false, F, C, F, CUDA_R_16BF, CUDA_R_16BF, ep, bg ? db : nullptr, bt, aux ? pre : nullptr, F);
      if (r.ok) printf("%-28s %s %.3f ms\n", name, bg ? (bt == CUDA_R_32F ? "bias f32" : "bias bf16") : "", time_it([&] { go(r, w2, dy, dh, 0.f); }));
    }
  }
  // head dW (V x C) = dl^T x : row-major dW (V, C) = col-major (C, V) ld C. = x^T-as... D col (C x V) = x (col-major (C, M) ld C, op N) . dl (row-major (M, Vp) = col-major (Vp, M): need (M x V) -> op T, ld Vp)
  for (int vv : {V, Vp}) {
    Run r = make(C, vv, M, false, true, C, Vp, C, CUDA_R_16BF, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, nullptr, CUDA_R_32F, nullptr, 0);
    if (r.ok) printf("head dW f32 beta=1 V=%d       %.3f ms\n", vv, time_it([&] { go(r, x, dl, dw32, 1.f); }));
  }
  return 0;
}
