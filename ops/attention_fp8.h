// FP8 (e4m3) attention forward, as FlashAttention-3 describes it: an inference path (no backward,
// no dropout, no lse) that quantises Q, K, V to e4m3 -- one fp32 scale per tile (64 query rows,
// 128 keys: the kernel's tiles) or per tensor -- optionally after rotating Q and K along D by one
// random-sign Walsh-Hadamard matrix (which leaves Q K^T unchanged and spreads outliers over D),
// then runs S = Q K^T and O = P V on FP8 tensor cores with fp32 accumulation and softmax; P goes
// into e4m3 as 256 p. O is returned in q's dtype.
//
// Devices:
//   CUDA: bf16 q, k, v (B, T, H, D) with the flash kernels' stride and alignment rules
//         (ops/attention.h); D in {64, 128, 256}; needs wgmma's FP8 tensor cores: a compute
//         capability 9.0 GPU (H100 / H200) and a build whose CMAKE_CUDA_ARCHITECTURES lists 90a.
//   CPU:  the emulation (ops/cpu/attention_fp8_reference.h): the same quantisation bit for bit, the
//         attention in float64 from the dequantised values with P rounded as the kernel rounds it.
//         f32, f64 or bf16 inputs (f32/f64 are quantised from their bf16 rounding, as the GPU path
//         would see them); any strides; slow (tests and reference runs).
// Refused everywhere: dropout_p > 0 (inference only), block-sparse masks, a document mask
// (doc_start), other head dims.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/attention.h"
#include "ops/attention_fp8_params.h"

namespace ft::ops {

struct Fp8AttentionOptions {
  bool block_quant = true;  // one scale per tile; false: one scale per tensor (the FA3 baseline)
  bool hadamard = true;     // rotate Q and K along D before quantising
  uint64_t hadamard_seed = 0x5eed;  // the rotation's signs (any seed: the rotation cancels in Q K^T)
};

// One quantised operand (ops/attention_fp8_params.h): tile images and scales on the input's device.
struct Fp8QuantizedOperand {
  Tensor bytes;   // (B * H, T_pad, D) u8
  Tensor scales;  // (B * H, T_pad / tile rows) f32
  Fp8Operand operand = Fp8Operand::kQ;
  int B = 0, T = 0, H = 0, D = 0;
};

// q, k, v (B, T, H, D) -> out (B, T, H, D), q's dtype, contiguous. opts: causal and softmax_scale
// (0: 1 / sqrt(D)); dropout and block-sparse settings must be off.
Tensor fp8_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts,
                             const Fp8AttentionOptions& fp8 = {});

// The two halves of fp8_attention_forward, for tests and benchmarks: quantise one operand (the
// rotation, when fp8.hadamard, applies to Q and K only), and attend from three quantised operands.
Fp8QuantizedOperand fp8_attention_quantize(const Tensor& x, Fp8Operand operand, const Fp8AttentionOptions& fp8);
Tensor fp8_attention_forward_quantized(const Fp8QuantizedOperand& q, const Fp8QuantizedOperand& k,
                                       const Fp8QuantizedOperand& v, const AttentionOptions& opts,
                                       DType out_dtype);

// The FP8 kernel's arguments for three quantised operands and a bf16 (B, T, H, D) output (strided,
// last dim contiguous): what fp8_attention_forward_quantized launches, and what a test hands
// cuda::flash_fp8_forward to run one schedule of the kernel.
Fp8AttentionParams fp8_attention_params(const Fp8QuantizedOperand& q, const Fp8QuantizedOperand& k,
                                        const Fp8QuantizedOperand& v, const Tensor& out, float softmax_scale,
                                        bool causal);

}  // namespace ft::ops
