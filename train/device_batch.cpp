#include "train/device_batch.h"

#include <cstring>

namespace ft {

DeviceBatch to_device(const Batch& batch, Device device) {
  Tensor host = Tensor::empty({batch.B, batch.T + 1}, DType::I32);  // (B, T+1)
  std::memcpy(host.data_ptr(), batch.tokens, static_cast<size_t>(host.nbytes()));
  const Tensor windows = host.to(device);
  return {windows.slice(1, 0, batch.T).contiguous(), windows.slice(1, 1, batch.T + 1).contiguous()};
}

}  // namespace ft
