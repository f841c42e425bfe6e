// A C ABI over the attention launchers, loaded by bench_attention.py through ctypes so our kernels
// and PyTorch's run in one process on the same tensors, timed and memory-counted the same way.
// Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I. -Xcompiler -fPIC -shared
//        bench/attention/attention_capi.cu ops/cuda/attention/*.cu ops/cuda/naive_attention.cu
//        -lcublas -o libft_attention.so
// Variants (flash D = 64 only) are tile shapes kept for tuning; variant 0 is the shipped one.
#include <cublas_v2.h>

#include <cstdio>
#include <string>

#include "core/error.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_launch.cuh"
#include "ops/cuda/naive_attention.h"

namespace {

using namespace ft;
using namespace ft::cuda::flash;

std::string g_error;
cublasHandle_t g_cublas = nullptr;

void run_flash_variant(bool forward, int variant, const AttentionParams& p, cudaStream_t s) {
  if (p.D != 64 || variant == 0) {
    forward ? ft::cuda::flash_attention_forward(p, s) : ft::cuda::flash_attention_backward(p, s);
    return;
  }
  if (forward) {
    switch (variant) {
      case 1: return run_flash_fwd_with<FlashFwdTraits<64, 64, 64, 4, 3>>(p, s);
      case 2: return run_flash_fwd_with<FlashFwdTraits<64, 128, 64, 4, 2>>(p, s);
      case 3: return run_flash_fwd_with<FlashFwdTraits<64, 64, 64, 4, 4>>(p, s);
    }
  } else {
    switch (variant) {
      case 1: return run_flash_bwd_with<FlashBwdTraits<64, 16, 64, 4, false, 4, 1>>(p, s);
      case 2: return run_flash_bwd_with<FlashBwdTraits<64, 32, 64, 4, true, 3, 1>>(p, s);
      case 3: return run_flash_bwd_with<FlashBwdTraits<64, 16, 128, 4, false, 2, 2>>(p, s);
    }
  }
  throw Error(str("unknown variant ", variant));
}

}  // namespace

extern "C" {

const char* ft_attn_last_error() { return g_error.c_str(); }

// op: 0 forward, 1 backward. impl: 0 flash, 1 naive. Layout: q, k, v, dq, dk, dv share
// (batch, row, head) strides qkv_strides[3]; o, dout are contiguous (B, T, H, D).
// naive_bufs: scores (fp32), probs, probs_dropped, dscores, each B*H*T*T.
int ft_attn_run(int op, int impl, int variant, void* q, void* k, void* v, void* o, float* lse,
                void* dout, void* dq, void* dk, void* dv, float* dsum, float* dq_accum,
                void** naive_bufs, int B, int T, int H, int D, const long long* qkv_strides,
                int causal, float dropout_p, unsigned long long seed, unsigned long long offset,
                int dtype, float softmax_scale, void* stream) {
  try {
    AttentionParams p;
    p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse, p.dout = dout, p.dq = dq, p.dk = dk, p.dv = dv;
    p.dsum = dsum, p.dq_accum = dq_accum;
    p.B = B, p.T = T, p.H = H, p.D = D;
    p.softmax_scale = softmax_scale;
    p.causal = causal != 0;
    p.dtype = dtype == 0 ? AttentionDType::kBF16 : AttentionDType::kF16;
    p.dropout = make_dropout_params(PhiloxState{seed, offset}, dropout_p);
    for (int64_t* s : {&p.q_batch_stride, &p.k_batch_stride, &p.v_batch_stride,
                         &p.dq_batch_stride, &p.dk_batch_stride, &p.dv_batch_stride})
      *s = qkv_strides[0];
    for (int64_t* s : {&p.q_row_stride, &p.k_row_stride, &p.v_row_stride, &p.dq_row_stride,
                         &p.dk_row_stride, &p.dv_row_stride})
      *s = qkv_strides[1];
    for (int64_t* s : {&p.q_head_stride, &p.k_head_stride, &p.v_head_stride,
                         &p.dq_head_stride, &p.dk_head_stride, &p.dv_head_stride})
      *s = qkv_strides[2];
    const BthdStrides c = contiguous_bthd_strides(T, H, D);
    p.o_batch_stride = p.do_batch_stride = c.batch;
    p.o_row_stride = p.do_row_stride = c.row;
    p.o_head_stride = p.do_head_stride = c.head;
    auto s = static_cast<cudaStream_t>(stream);
    if (impl == 0) {
      run_flash_variant(op == 0, variant, p, s);
    } else {
      if (!g_cublas) CUBLAS_CHECK(cublasCreate(&g_cublas));
      const ft::cuda::NaiveAttentionBuffers buf{static_cast<float*>(naive_bufs[0]), naive_bufs[1],
                                                naive_bufs[2], naive_bufs[3]};
      op == 0 ? ft::cuda::naive_attention_forward(p, buf, g_cublas, s)
              : ft::cuda::naive_attention_backward(p, buf, g_cublas, s);
    }
    return 0;
  } catch (const std::exception& e) {
    g_error = e.what();
    return 1;
  }
}

}  // extern "C"
