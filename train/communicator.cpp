#include "train/communicator.h"

#include "core/error.h"

namespace ft {

void check_collective_tensor(const char* op, const Tensor& t, Device device) {
  FT_CHECK_ARG(t.defined(), "[dist] ", op, ": undefined tensor");
  FT_CHECK_ARG(t.dtype() == DType::F32 && t.is_contiguous(), "[dist] ", op, ": needs a contiguous f32 tensor, got ",
               t.dtype(), " ", t.shape(), t.is_contiguous() ? "" : " (strided)");
  FT_CHECK_ARG(t.device() == device, "[dist] ", op, ": tensor on ", t.device(), ", the communicator on ", device);
}

}  // namespace ft
