#include "train/dist/cpu_communicator.h"

#include <cstring>
#include <vector>

#include "core/half.h"

namespace ft {

void CpuCommunicator::all_reduce_sum_(const Tensor& t) {
  check_collective_tensor("all_reduce_sum_", t, Device::cpu());
  if (t.numel() == 0) return;
  if (t.dtype() == DType::F32) {
    rdv_.all_reduce_sum(t.data<float>(), static_cast<size_t>(t.numel()));
    return;
  }
  // bf16: the widened values summed in fp32 (on rank 0, in rank order), rounded once on the way back.
  bf16* p = t.data<bf16>();
  std::vector<float> wide(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = bf16_to_float(p[i]);
  rdv_.all_reduce_sum(wide.data(), wide.size());
  for (size_t i = 0; i < wide.size(); ++i) p[i] = float_to_bf16(wide[i]);
}

void CpuCommunicator::reduce_scatter_sum(const Tensor& in, const Tensor& out) {
  check_collective_tensor("reduce_scatter_sum", in, Device::cpu());
  check_collective_tensor("reduce_scatter_sum", out, Device::cpu());
  const int64_t n = out.numel();
  check_world_multiple("reduce_scatter_sum", "in", in, "out", out, world_size());
  if (n == 0) return;
  // bf16 as all_reduce_sum_ does it: widened, summed in fp32, the rank's slice rounded once.
  const bool half = in.dtype() == DType::BF16;
  std::vector<float> sum(static_cast<size_t>(in.numel()));
  if (half) {
    const bf16* p = in.data<bf16>();
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = bf16_to_float(p[i]);
  } else {
    std::memcpy(sum.data(), in.data<float>(), sum.size() * sizeof(float));
  }
  rdv_.all_reduce_sum(sum.data(), sum.size());
  const float* mine = sum.data() + n * rank();
  if (half) {
    bf16* o = out.data<bf16>();
    for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16(mine[i]);
  } else {
    std::memcpy(out.data<float>(), mine, static_cast<size_t>(n) * sizeof(float));
  }
}

void CpuCommunicator::all_gather(const Tensor& in, const Tensor& out) {
  check_collective_tensor("all_gather", in, Device::cpu(), /*moves_only=*/true);
  check_collective_tensor("all_gather", out, Device::cpu(), /*moves_only=*/true);
  const int64_t n = in.numel();
  check_world_multiple("all_gather", "out", out, "in", in, world_size());
  if (n == 0) return;
  const size_t bytes = static_cast<size_t>(n) * in.itemsize();
  const auto* p = static_cast<const uint8_t*>(in.data_ptr());
  const std::vector<std::vector<uint8_t>> parts = rdv_.all_gather(std::vector<uint8_t>(p, p + bytes));
  auto* o = static_cast<uint8_t*>(out.data_ptr());
  for (int r = 0; r < world_size(); ++r) {
    FT_CHECK_ARG(parts[r].size() == bytes, "[dist] all_gather: rank ", r, " sent ", parts[r].size(),
                 " bytes, expected ", bytes);
    std::memcpy(o + bytes * r, parts[r].data(), bytes);
  }
}

}  // namespace ft
