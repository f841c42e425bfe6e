// Launch helpers shared by every flash launcher (mma.sync and wgmma kernels alike).
#pragma once

#include <algorithm>

#include "core/cuda/check.h"
#include "ops/attention_params.h"

namespace ft::cuda::flash {

// Opts the kernel in to `bytes` of dynamic shared memory. A GPU that offers less per block (the
// D = 256 backward's 217 KiB fit a Hopper's 227 KiB, not an A100's 163 KiB) gets an error that says
// so; the device is asked only then, so launches pay nothing for the message.
template <class Kernel>
void set_smem_limit(Kernel kernel, int bytes) {
  if (bytes <= 48 * 1024) return;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();  // clear it: the launch it was for does not happen
  int device = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > optin)
    throw Error(str("[flash_attention] this head dim's kernel needs ", bytes, " bytes of shared memory per block; ",
                    "GPU ", device, " offers ", optin, " (head dim 256 needs a Hopper GPU; naive attention takes any)"));
  CUDA_CHECK(err);
}

// Grid: 1-D, (blocks along T) x B * H CTAs in grouped_block_order. B * H stays limited to 65535
// (the limit of the former 2-D grid; it also keeps the CTA count far below 2^31).
inline void check_grid(const AttentionParams& p) {
  FT_CHECK_ARG(static_cast<int64_t>(p.B) * p.H <= 65535, "[flash_attention] B * H = ",
               static_cast<int64_t>(p.B) * p.H, " exceeds 65535");
}

// A kernel instantiated without the document mask (kDocMask false: attention_params.h) compiles no
// document-mask code, so it must not get a doc_start; the launchers pick kDocMask from p.doc_start,
// and this catches a direct launch (the benchmark's tuning variants) that would silently drop it.
template <bool kDocMask>
void check_doc_mask_built(const AttentionParams& p) {
  FT_CHECK_ARG(kDocMask || p.doc_start == nullptr,
               "[flash_attention] a document mask (doc_start) reached a kernel built without it");
}

// Heads per launch-order group (see grouped_block_order): group_tokens / T, at least 1.
inline int heads_per_group(const AttentionParams& p, int group_tokens) {
  const int bh = p.B * p.H;
  if (group_tokens <= 0) return 1;
  return std::max(1, std::min(bh, group_tokens / std::max(p.T, 1)));
}

// setmaxnreg moves registers between the warpgroups of a warp-specialised kernel (flash_tma.cuh)
// that was given exactly what its traits Kt split (kProducerRegs for warpgroup 0, kConsumerRegs for
// the others: 384 x 168 with two consumers, 512 x 128 with three); a build whose kernel starts with another count would make the
// consumers' setmaxnreg.inc wait forever, so that is an error here instead. Checked once per kernel:
// the kernel is a template argument, because kernels of one traits type share their signature (and
// a function-local static keyed on the signature would check only the first of them).
template <class Kt, auto kKernel>
void check_register_split(const char* what) {
  static const int regs = [] {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kKernel));
    return attr.numRegs;
  }();
  constexpr int kGiven = (128 * Kt::kProducerRegs + (Kt::kNThreads - 128) * Kt::kConsumerRegs) / Kt::kNThreads;
  FT_CHECK_ARG(regs == kGiven, "[flash_attention] the warp-specialised ", what, " was built with ", regs,
               " registers a thread where its setmaxnreg split assumes ", kGiven, "; rebuild or disable it");
}

// Launches a query-major flash kernel (forwards, the dQ kernel): one CTA per Kt::kBlockM query rows
// of each (batch, head), a 1-D grid walked in grouped_block_order.
template <class Kt, class Kernel>
void launch_query_major(Kernel kernel, int smem_bytes, const AttentionParams& p, cudaStream_t stream,
                        int group_tokens) {
  check_grid(p);
  set_smem_limit(kernel, smem_bytes);
  const unsigned grid = static_cast<unsigned>((p.T + Kt::kBlockM - 1) / Kt::kBlockM) * p.B * p.H;
  kernel<<<grid, Kt::kNThreads, smem_bytes, stream>>>(p, heads_per_group(p, group_tokens));
  CUDA_CHECK_LAUNCH();
}

// Launches a key-major flash backward kernel: one CTA per Kt::kBlockN keys of each (batch, head).
template <class Kt, class Kernel>
void launch_key_major(Kernel kernel, int smem_bytes, const AttentionParams& p, cudaStream_t stream,
                      int group_tokens, int* dq_semaphore) {
  set_smem_limit(kernel, smem_bytes);
  const unsigned grid = static_cast<unsigned>((p.T + Kt::kBlockN - 1) / Kt::kBlockN) * p.B * p.H;
  kernel<<<grid, Kt::kNThreads, smem_bytes, stream>>>(p, heads_per_group(p, group_tokens), dq_semaphore);
  CUDA_CHECK_LAUNCH();
}

}  // namespace ft::cuda::flash
