#include "train/dist/communicator.h"

#include "core/error.h"

namespace ft {

void check_collective_tensor(const char* op, const Tensor& t, Device device, bool moves_only) {
  FT_CHECK_ARG(t.defined(), "[dist] ", op, ": undefined tensor");
  const DType d = t.dtype();
  const bool dtype_ok = d == DType::F32 || d == DType::BF16 || (moves_only && d == DType::F16);
  FT_CHECK_ARG(dtype_ok && t.is_contiguous(), "[dist] ", op, ": needs a contiguous ",
               moves_only ? "f32, bf16 or f16" : "f32 or bf16", " tensor, got ", d, " ", t.shape(),
               t.is_contiguous() ? "" : " (strided)");
  FT_CHECK_ARG(t.device() == device, "[dist] ", op, ": tensor on ", t.device(), ", the communicator on ", device);
}

void check_world_multiple(const char* op, const char* whole_name, const Tensor& whole, const char* part_name,
                          const Tensor& part, int world_size) {
  FT_CHECK_ARG(whole.numel() == part.numel() * world_size, "[dist] ", op, ": ", whole_name, " has ", whole.numel(),
               " elements, ", part_name, " ", part.numel(), " x world size ", world_size);
  FT_CHECK_ARG(whole.dtype() == part.dtype(), "[dist] ", op, ": ", whole_name, " is ", whole.dtype(), ", ", part_name,
               " ", part.dtype());
}

}  // namespace ft
