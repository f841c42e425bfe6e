// A loader batch (host, (B, T+1) int32 windows) as the model's inputs and targets on a device.
#pragma once

#include "core/tensor.h"
#include "data/loader.h"

namespace ft {

struct DeviceBatch {
  Tensor inputs;   // (B, T) int32: tokens[:, 0:T]
  Tensor targets;  // (B, T) int32: tokens[:, 1:T+1]
  int64_t tokens() const { return inputs.numel(); }
};

// One host-to-device copy of the whole window block, then two contiguous slices on the device.
DeviceBatch to_device(const Batch& batch, Device device);

}  // namespace ft
