// 2^x on the special-function unit, shared by the kernels that take exp(x) as 2^(x log2 e) with
// the scale or the subtracted max folded into one FFMA: flash attention's softmax and the
// training head's cross-entropy.
#pragma once

namespace ft::cuda {

// log2(e): exp(x) = fast_exp2(x * kLog2e), with any scale folded in.
constexpr float kLog2e = 1.4426950408889634f;

// 2^x, flush-to-zero: exp2f() without fast-math adds range fix-ups around the same instruction
// (and __expf is this after a multiply). exp2(-inf) = +0, which masking relies on.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace ft::cuda
