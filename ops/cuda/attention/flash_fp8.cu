// FP8 attention launchers: the quantiser's launches and the head-dim and variant switch of the forward.
#include "ops/cuda/attention/flash_fp8.h"

#include <cmath>
#include <cstdint>

#include "core/cuda/check.h"
#include "core/error.h"
#include "ops/cuda/attention/flash_fp8_quantize_kernel.cuh"
#include "ops/cuda/attention/flash_fp8_run.h"

namespace ft::cuda {
namespace {

// One CTA per tile image; the shape (threads, rows per thread) is Fp8QuantShape's.
template <int D, Fp8Operand kOperand, bool kRotate>
void launch_quantize(const Fp8QuantParams& p, cudaStream_t stream) {
  using Shape = flash::Fp8QuantShape<D, kOperand>;
  const dim3 grid(static_cast<unsigned>(fp8_padded_rows(p.T) / Shape::kTileRows), static_cast<unsigned>(p.B * p.H));
  flash::fp8_quantize_kernel<D, kOperand, kRotate><<<grid, Shape::kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_quantize(const Fp8QuantParams& p, cudaStream_t stream) {
  switch (p.operand) {
    case Fp8Operand::kQ:
      return p.hadamard ? launch_quantize<D, Fp8Operand::kQ, true>(p, stream)
                        : launch_quantize<D, Fp8Operand::kQ, false>(p, stream);
    case Fp8Operand::kK:
      return p.hadamard ? launch_quantize<D, Fp8Operand::kK, true>(p, stream)
                        : launch_quantize<D, Fp8Operand::kK, false>(p, stream);
    case Fp8Operand::kV: return launch_quantize<D, Fp8Operand::kV, false>(p, stream);
  }
}

}  // namespace

void fp8_quantize(const Fp8QuantParams& p, Stream stream) {
  FT_CHECK_ARG(p.D == 64 || p.D == 128 || p.D == 256, "[fp8_attention] head dim ", p.D, " not in {64, 128, 256}");
  FT_CHECK_ARG(static_cast<int64_t>(p.B) * p.H <= 65535, "[fp8_attention] B * H = ",
               static_cast<int64_t>(p.B) * p.H, " exceeds 65535");
  FT_CHECK_ARG(!p.hadamard || p.operand != Fp8Operand::kV, "[fp8_attention] V is never rotated");
  // The kernel reads rows with 16-byte loads (the ops front door checks the same for its tensors).
  const bool aligned = reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && (p.B == 1 || p.batch_stride % 8 == 0) &&
                       (p.T == 1 || p.row_stride % 8 == 0) && (p.H == 1 || p.head_stride % 8 == 0);
  FT_CHECK_ARG(aligned, "[fp8_attention] the quantiser needs a 16-byte aligned input with batch, row and head ",
               "strides that are multiples of 8 elements, got strides (", p.batch_stride, ", ", p.row_stride, ", ",
               p.head_stride, ")");
  auto run = [&](const Fp8QuantParams& q) {
    switch (q.D) {
      case 64: return launch_quantize<64>(q, stream);
      case 128: return launch_quantize<128>(q, stream);
      default: return launch_quantize<256>(q, stream);
    }
  };
  if (!p.per_tensor) return run(p);
  FT_CHECK_ARG(p.amax != nullptr, "[fp8_attention] per-tensor quantisation needs an amax word");
  CUDA_CHECK(cudaMemsetAsync(p.amax, 0, sizeof(float), stream));
  Fp8QuantParams pass = p;
  pass.amax_only = true;
  run(pass);
  pass.amax_only = false;
  run(pass);
}

void flash_fp8_forward(const Fp8AttentionParams& p, Stream stream) {
  flash_fp8_forward(p, stream, fp8_fwd_variant_from_env());
}

void flash_fp8_forward(const Fp8AttentionParams& p, Stream stream, Fp8FwdVariant variant) {
  // The kernels take each row's maximum on the unscaled scores (fp8_softmax_tile), which needs a
  // positive scale; ops::fp8_attention_forward turns 0 into 1/sqrt(D) before it gets here.
  FT_CHECK_ARG(p.softmax_scale > 0.f && std::isfinite(p.softmax_scale), "[fp8_attention] softmax_scale must be finite and > 0, got ",
               p.softmax_scale);
  switch (p.D) {
    case 64: return flash::run_flash_fp8_fwd<64>(p, stream, variant);
    case 128: return flash::run_flash_fp8_fwd<128>(p, stream, variant);
    case 256: return flash::run_flash_fp8_fwd<256>(p, stream, variant);
    default: FT_CHECK_ARG(false, "[fp8_attention] head dim ", p.D, " not in {64, 128, 256}");
  }
}

}  // namespace ft::cuda
