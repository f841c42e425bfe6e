#include "train/device_choice.h"

#ifdef FT_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "core/error.h"
#include "ops/attention.h"

namespace ft {

std::string cuda_incompatibility(const TrainConfig& cfg) {
  // Naive attention runs f32 on CUDA (cuBLAS f32 GEMMs, no TF32); the flash kernels are 16-bit
  // tensor-core tiles (ops/attention.h).
  if (cfg.mixed_precision == MixedPrecision::FP32 && cfg.use_flash_attention)
    return "mixed_precision = fp32 on a GPU needs use_flash_attention: false (the flash kernels take bf16 or f16)";
  const int64_t head_dim = cfg.d_model / cfg.n_heads;
  if (cfg.use_flash_attention && !ops::cuda_flash_takes_head_dim(head_dim))
    return str("use_flash_attention with head dim d_model / n_heads = ", head_dim,
               " runs on the CPU only (the CUDA flash kernels take ", ops::kCudaFlashHeadDims,
               "; use_flash_attention: false takes any head dim on a GPU)");
  return "";
}

Device resolve_device(const TrainConfig& cfg) {
  switch (cfg.device) {
    case DeviceChoice::Cpu: return Device::cpu();
    case DeviceChoice::Auto:
      return cuda_available() && cuda_incompatibility(cfg).empty() ? Device::cuda(0) : Device::cpu();
    case DeviceChoice::Cuda: {
      if (!cuda_available())
        throw Error("config: device = cuda, but no usable CUDA device was found (use device: auto or cpu)");
      const std::string why = cuda_incompatibility(cfg);
      if (!why.empty()) throw Error(str("config: device = cuda, but ", why));
      return Device::cuda(0);
    }
  }
  throw Error("config: unknown device value");
}

std::string device_note(const TrainConfig& cfg, Device chosen) {
  if (cfg.device != DeviceChoice::Auto || !chosen.is_cpu() || !cuda_available()) return "";
  const std::string why = cuda_incompatibility(cfg);
  return why.empty() ? "" : str("device: auto chose the CPU although a GPU is present: ", why);
}

std::string device_name(Device d) {
  if (d.is_cpu()) return "cpu";
#ifdef FT_WITH_CUDA
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, d.index) == cudaSuccess) return props.name;
#endif
  return "cuda";
}

}  // namespace ft
