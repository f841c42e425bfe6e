#include "train/device_choice.h"

#ifdef FT_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include "core/error.h"

namespace ft {

Device resolve_device(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::Cpu: return Device::cpu();
    case DeviceChoice::Auto: return cuda_available() ? Device::cuda(0) : Device::cpu();
    case DeviceChoice::Cuda:
      if (!cuda_available())
        throw Error("config: device = cuda, but no usable CUDA device was found (use device: auto or cpu)");
      return Device::cuda(0);
  }
  throw Error("config: unknown device value");
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
