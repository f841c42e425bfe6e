// FP8 attention launchers: the quantiser's launches and the head-dim and variant switch of the forward.
#include "ops/cuda/attention/flash_fp8.h"

#include "core/cuda/check.h"
#include "core/error.h"
#include "ops/cuda/attention/flash_fp8_quantize_kernel.cuh"
#include "ops/cuda/attention/flash_fp8_run.h"

namespace ft::cuda {
namespace {

template <int D, int kTileRows>
void launch_quantize(const Fp8QuantParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(fp8_padded_rows(p.T) / kTileRows), static_cast<unsigned>(p.B * p.H));
  flash::fp8_quantize_kernel<D, kTileRows><<<grid, flash::kFp8QuantThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_quantize(const Fp8QuantParams& p, cudaStream_t stream) {
  if (p.operand == Fp8Operand::kQ) return launch_quantize<D, kFp8QTileRows>(p, stream);
  launch_quantize<D, kFp8KvTileRows>(p, stream);
}

}  // namespace

void fp8_quantize(const Fp8QuantParams& p, Stream stream) {
  FT_CHECK_ARG(p.D == 64 || p.D == 128 || p.D == 256, "[fp8_attention] head dim ", p.D, " not in {64, 128, 256}");
  FT_CHECK_ARG(static_cast<int64_t>(p.B) * p.H <= 65535, "[fp8_attention] B * H = ",
               static_cast<int64_t>(p.B) * p.H, " exceeds 65535");
  FT_CHECK_ARG(!p.hadamard || p.operand != Fp8Operand::kV, "[fp8_attention] V is never rotated");
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
  switch (p.D) {
    case 64: return flash::run_flash_fp8_fwd<64>(p, stream, variant);
    case 128: return flash::run_flash_fp8_fwd<128>(p, stream, variant);
    case 256: return flash::run_flash_fp8_fwd<256>(p, stream, variant);
    default: FT_CHECK_ARG(false, "[fp8_attention] head dim ", p.D, " not in {64, 128, 256}");
  }
}

}  // namespace ft::cuda
