// TMA tensor maps (flash_tma_map.h). cuTensorMapEncodeTiled is a driver API call: it is reached
// through the runtime's entry-point query, so nothing links libcuda directly.
#include "ops/cuda/attention/flash_tma_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "core/error.h"

namespace ft::cuda::flash {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                             cudaEnableDefault, &status);
    FT_CHECK_ARG(err == cudaSuccess && status == cudaDriverEntryPointSuccess && p != nullptr,
                 "[flash_attention] the CUDA driver has no cuTensorMapEncodeTiled (TMA needs a driver for CUDA 12+): ",
                 cudaGetErrorString(err));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

bool tma_head_rows_supported(const HeadRowsTensor& t) {
  const auto aligned16 = [](int64_t elements) { return elements % 8 == 0; };
  return reinterpret_cast<uintptr_t>(t.base) % 16 == 0 && t.D % 64 == 0 && aligned16(t.batch_stride) &&
         aligned16(t.row_stride) && aligned16(t.head_stride) && t.batch_stride > 0 && t.row_stride > 0 &&
         t.head_stride > 0;
}

CUtensorMap make_tma_head_rows_map(const HeadRowsTensor& t, int box_rows) {
  FT_CHECK_ARG(tma_head_rows_supported(t), "[flash_attention] a TMA map of a tensor TMA cannot describe");
  FT_CHECK_ARG(box_rows > 0 && box_rows <= 256, "[flash_attention] TMA box of ", box_rows, " rows");
  CUtensorMap map{};
  // Innermost first: column (D), row (T), head (H), batch (B); the strides of the outer three in bytes.
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.D), static_cast<cuuint64_t>(t.T),
                              static_cast<cuuint64_t>(t.H), static_cast<cuuint64_t>(t.B)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(t.row_stride) * 2, static_cast<cuuint64_t>(t.head_stride) * 2,
                                 static_cast<cuuint64_t>(t.batch_stride) * 2};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUtensorMapDataType type = t.bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = encode_tiled()(&map, type, 4, const_cast<void*>(t.base), dims, strides, box, element_strides,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  FT_CHECK_ARG(r == CUDA_SUCCESS, "[flash_attention] cuTensorMapEncodeTiled refused a (B, T, H, D) = (", t.B, ", ",
               t.T, ", ", t.H, ", ", t.D, ") map with strides (", t.batch_stride, ", ", t.row_stride, ", ",
               t.head_stride, "): CUresult ", static_cast<int>(r));
  return map;
}

namespace {
HeadRowsTensor rows_of(const void* base, const AttentionParams& p, int heads, int64_t batch_stride, int64_t row_stride,
                       int64_t head_stride) {
  return {base, p.dtype == AttentionDType::kBF16, p.B, p.T, heads, p.D, batch_stride, row_stride, head_stride};
}
}  // namespace

bool flash_fwd_tma_supported(const AttentionParams& p) {
  if (p.dtype != AttentionDType::kBF16 && p.dtype != AttentionDType::kF16) return false;
  const int hk = attention_kv_heads(p);
  return tma_head_rows_supported(rows_of(p.q, p, p.H, p.q_batch_stride, p.q_row_stride, p.q_head_stride)) &&
         tma_head_rows_supported(rows_of(p.k, p, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride)) &&
         tma_head_rows_supported(rows_of(p.v, p, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride));
}

bool flash_bwd_tma_supported(const AttentionParams& p) {
  return flash_fwd_tma_supported(p) &&
         tma_head_rows_supported(rows_of(p.dout, p, p.H, p.do_batch_stride, p.do_row_stride, p.do_head_stride));
}

FlashBwdTmaMaps make_flash_bwd_tma_maps(const AttentionParams& p, int q_box_rows, int kv_box_rows) {
  const int hk = attention_kv_heads(p);
  return {make_tma_head_rows_map(rows_of(p.q, p, p.H, p.q_batch_stride, p.q_row_stride, p.q_head_stride), q_box_rows),
          make_tma_head_rows_map(rows_of(p.dout, p, p.H, p.do_batch_stride, p.do_row_stride, p.do_head_stride),
                                 q_box_rows),
          make_tma_head_rows_map(rows_of(p.k, p, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride), kv_box_rows),
          make_tma_head_rows_map(rows_of(p.v, p, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride), kv_box_rows)};
}

FlashFwdTmaMaps make_flash_fwd_tma_maps(const AttentionParams& p, int q_box_rows, int kv_box_rows) {
  const int hk = attention_kv_heads(p);
  return {make_tma_head_rows_map(rows_of(p.q, p, p.H, p.q_batch_stride, p.q_row_stride, p.q_head_stride), q_box_rows),
          make_tma_head_rows_map(rows_of(p.k, p, hk, p.k_batch_stride, p.k_row_stride, p.k_head_stride), kv_box_rows),
          make_tma_head_rows_map(rows_of(p.v, p, hk, p.v_batch_stride, p.v_row_stride, p.v_head_stride), kv_box_rows)};
}

}  // namespace ft::cuda::flash
