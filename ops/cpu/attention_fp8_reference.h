// CPU emulation of the FP8 (e4m3) attention forward (ops/attention_fp8.h), for tests and as the op's
// CPU path.
//
// 1. fp8_quantize: the CUDA quantiser's arithmetic, bit for bit -- fp32 sign flips and fast
//    Walsh-Hadamard butterflies in the same order, the tile's |x| max, x * (448 / amax) rounded to
//    e4m3 -- written into the same tile images (ops/attention_fp8_params.h), so a GPU test can
//    compare bytes and scales exactly.
// 2. fp8_dequantize: tile images back to (B, T, H, D) doubles, byte * scale (for Q and K in the
//    rotated basis when they were rotated: rotating both leaves Q K^T unchanged).
// 3. fp8_attention_emulate: attention in float64 from dequantised operands, with the kernel's key
//    tiles (kFp8KvTileRows) and online softmax, and P rounded to e4m3 exactly where the kernel rounds
//    it (256 exp(s - running max)), the row sum over the same rounded values, as the D = 64 and 128
//    default schedules add them on the tensor cores (the plain and pipe schedules add the unrounded
//    values: a difference far inside the GPU tests' bounds, and RMSE equal to three digits).
// The exact ground truth is ops/cpu/attention_reference.h's attention_reference_forward.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/attention_fp8_params.h"
#include "ops/attention_params.h"

namespace ft::cpu {

struct Fp8Quantized {
  std::vector<uint8_t> bytes;  // (B * H, T_pad, D) tile images
  std::vector<float> scales;   // (B * H, T_pad / tile rows)
};

// The random sign flips of the Hadamard rotation, a function of (seed, D) only.
void fp8_hadamard_signs(uint64_t seed, int D, uint32_t (&sign_bits)[8]);

// Unnormalised fast Walsh-Hadamard transform of x[0, D) in place (D a power of two), butterfly
// strides 1, 2, 4, ... like the CUDA quantiser: applying it twice multiplies by D.
void fwht_inplace(float* x, int D);

// The quantiser's rotation of one row in place, without its 1 / sqrt(D) (which goes into the
// scale): the sign flips of sign_bits, then fwht_inplace, in fp32 as on the GPU.
void fp8_rotate_inplace(float* row, int D, const uint32_t* sign_bits);

// x: contiguous (B, T, H, D) floats (already bf16 values: the GPU quantiser reads bf16).
// sign_bits null: no rotation (V is never rotated).
Fp8Quantized fp8_quantize(const float* x, int B, int T, int H, int D, Fp8Operand operand,
                          bool per_tensor, const uint32_t* sign_bits);

std::vector<double> fp8_dequantize(const Fp8Quantized& qt, int B, int T, int H, int D, Fp8Operand operand);

// fp8_dequantize(fp8_quantize(...)): what the kernel sees of x, as (B, T, H, D) doubles.
std::vector<double> fp8_round_trip(const float* x, int B, int T, int H, int D, Fp8Operand operand, bool per_tensor,
                                   const uint32_t* sign_bits);

// cfg: B, H, T, D, softmax_scale, causal (pointers, strides, dropout, block-sparse ignored; the FP8
// op refuses the latter two). q, k, v, o contiguous (B, T, H, D).
void fp8_attention_emulate(const AttentionParams& cfg, const double* q, const double* k, const double* v,
                           double* o);

// All of it: quantise bf16-valued q, k, v like fp8_attention_forward (per-tensor or per-tile, with or
// without the rotation of Q and K), dequantise, emulate. o is (B, T, H, D).
void fp8_attention_forward_emulated(const AttentionParams& cfg, const float* q, const float* k, const float* v,
                                    bool block_quant, bool hadamard, uint64_t hadamard_seed, double* o);

}  // namespace ft::cpu
