// Which device a run uses, and its name for the MFU denominator (train/metrics.h).
#pragma once

#include <string>

#include "core/device.h"
#include "train/config/config.h"

namespace ft {

// Why `cfg`'s model cannot run on a GPU, or "" when it can: the CUDA flash kernels take bf16/f16
// (so mixed_precision fp32 on a GPU needs use_flash_attention: false; naive attention runs f32)
// and head dims 64, 128 and 256 (ops::cuda_flash_takes_head_dim).
std::string cuda_incompatibility(const TrainConfig& cfg);
// cfg.device auto: cuda:0 when a GPU is usable and the config can run there, else the CPU.
// cuda: cuda:0, or an ft::Error naming why not (no GPU, or cuda_incompatibility). cpu: the CPU.
Device resolve_device(const TrainConfig& cfg);
// For the run's header: why device auto picked the CPU although a GPU is usable ("device: auto
// chose the CPU although a GPU is present: <cuda_incompatibility>"), or "" when nothing needs
// saying (a GPU was chosen, device was cpu/cuda, or there is no GPU).
std::string device_note(const TrainConfig& cfg, Device chosen);
// cudaDeviceProp::name for a CUDA device ("NVIDIA H100 80GB HBM3"); "cpu" for the CPU.
std::string device_name(Device d);

}  // namespace ft
