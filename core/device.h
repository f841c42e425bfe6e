// Where a tensor lives. CUDA devices carry their ordinal.
#pragma once

#include <cstdint>
#include <ostream>

#include "core/stream.h"

namespace ft {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return Device{DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return Device{DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

std::ostream& operator<<(std::ostream& os, Device d);

// Number of usable CUDA devices: 0 when built without CUDA, without a driver, or without a GPU.
// Never throws, so it can decide between a GPU and a CPU run.
int cuda_device_count();
inline bool cuda_available() { return cuda_device_count() > 0; }

// The stream every op on `d` is issued on (one per device; CUDA gives the asynchrony).
// Throws when `d` is a CUDA device and the build has no CUDA.
Stream stream_for(Device d);

// Waits for all work issued on `d`. A no-op on the CPU.
void synchronize(Device d);

}  // namespace ft
