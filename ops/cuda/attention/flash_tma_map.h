// TMA tensor maps (CUtensorMap) over the rows of one attention operand, for the warp-specialised
// Hopper kernels (flash_tma.cuh). A map is built on the host for each launch (a few microseconds)
// and passed by value as a __grid_constant__ kernel parameter; a CUDA graph captures it with the
// launch, which is right because the captured step keeps its buffers.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "ops/attention_params.h"

namespace ft::cuda::flash {

// A (B, T, H, D) tensor of 16-bit elements with element strides (batch, row, head) and unit stride
// along D. The map's box is kBoxRows rows x 64 columns of one (batch, head), landing in shared
// memory as kBoxRows rows of 128 bytes in the 128-byte swizzle of flash_wgmma.cuh; rows past T are
// zeros. Coordinates (innermost first): column, row, head, batch.
struct HeadRowsTensor {
  const void* base;
  bool bf16;
  int B, T, H, D;
  int64_t batch_stride, row_stride, head_stride;
};

// Whether TMA can describe the tensor: a 16-byte aligned base, strides multiples of 8 elements,
// D a multiple of 64. (Otherwise the kernels that load with cp.async take the call.)
bool tma_head_rows_supported(const HeadRowsTensor& t);

// The map of kBoxRows-row boxes (box_rows <= 256). Throws ft::Error naming the driver's status when
// the driver refuses the map (it should not, after tma_head_rows_supported).
CUtensorMap make_tma_head_rows_map(const HeadRowsTensor& t, int box_rows);

// The maps of one backward call of the warp-specialised kernel (flash_bwd_ws_kernel.cuh): Q and dO
// with q_box_rows-row boxes, K and V (the K/V heads) with kv_box_rows-row boxes.
struct FlashBwdTmaMaps {
  CUtensorMap q, dout, k, v;
};
// Whether TMA can describe q, k, v and dout of the call (16-bit elements, D a multiple of 64).
bool flash_bwd_tma_supported(const AttentionParams& p);
FlashBwdTmaMaps make_flash_bwd_tma_maps(const AttentionParams& p, int q_box_rows, int kv_box_rows);

// The maps of one forward call of the warp-specialised kernel (flash_fwd_ws_kernel.cuh): Q with
// q_box_rows-row boxes, K and V (the K/V heads) with kv_box_rows-row boxes. The forward's params have
// no dout (its strides may be 0), hence its own check and maps rather than the backward's.
struct FlashFwdTmaMaps {
  CUtensorMap q, k, v;
};
// Whether TMA can describe q, k and v of the call (16-bit elements, D a multiple of 64).
bool flash_fwd_tma_supported(const AttentionParams& p);
FlashFwdTmaMaps make_flash_fwd_tma_maps(const AttentionParams& p, int q_box_rows, int kv_box_rows);

}  // namespace ft::cuda::flash
