// Which device a run uses, and its name for the MFU denominator (train/metrics.h).
#pragma once

#include <string>

#include "core/device.h"
#include "train/config.h"

namespace ft {

// auto: cuda:0 when ft::cuda_available(), else the CPU. cuda without a usable GPU throws ft::Error.
Device resolve_device(DeviceChoice choice);
// cudaDeviceProp::name for a CUDA device ("NVIDIA H100 80GB HBM3"); "cpu" for the CPU.
std::string device_name(Device d);

}  // namespace ft
