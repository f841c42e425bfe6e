// The one place in ops/ that branches on device and on floating dtype.
//
//   return dispatch(x.device(),
//       [&] { cpu::layernorm_forward(...); },            // CPU reference kernel
//       [&](Stream s) { cuda::layernorm_forward(p, s); }); // CUDA launcher on the device's stream
//
// CPU kernels are templates over float and double (double serves the float64 gradient check);
// bf16/f16 inputs reach the CPU path converted to f32 by the front-end and are rounded back.
#pragma once

#include <type_traits>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"

namespace ft::ops {

template <class CpuFn, class CudaFn>
decltype(auto) dispatch(Device d, CpuFn&& cpu, CudaFn&& cuda) {
  if (d.is_cuda()) return cuda(stream_for(d));
  return cpu();
}

// Calls fn(T{}) with T = float or double for an f32/f64 dtype; throws naming `op` otherwise.
template <class Fn>
decltype(auto) dispatch_cpu_float(DType t, const char* op, Fn&& fn) {
  switch (t) {
    case DType::F32: return fn(float{});
    case DType::F64: return fn(double{});
    default: break;
  }
  throw Error(str("[", op, "] CPU kernel takes f32 or f64, got ", t));
}

}  // namespace ft::ops
