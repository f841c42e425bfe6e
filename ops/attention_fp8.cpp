#include "ops/attention_fp8.h"

#include <climits>
#include <cmath>
#include <vector>

#include "ops/attention_checks.h"
#include "ops/cpu/attention_fp8_reference.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

#if defined(FT_WITH_CUDA)
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/attention/flash_fp8.h"
#endif

namespace ft::ops {
namespace {

constexpr const char* kOp = "fp8_attention";

int tile_rows(Fp8Operand operand) { return operand == Fp8Operand::kQ ? kFp8QTileRows : kFp8KvTileRows; }
const char* operand_name(Fp8Operand operand) {
  return operand == Fp8Operand::kQ ? "q" : operand == Fp8Operand::kK ? "k" : "v";
}

// Shape, dtype and device of one (B, T, H, D) input; the layout rules are check_attention_operand's.
void check_input(const char* name, const Tensor& x, const Tensor& q) {
  FT_CHECK_ARG(x.defined(), "[", kOp, "] ", name, " is undefined");
  FT_CHECK_ARG(q.defined() && q.dim() == 4, "[", kOp, "] q must be (B, T, H, D), got ",
               q.defined() ? describe_attention_operand(q) : std::string("undefined"));
  check_attention_operand(kOp, name, x, q);
  for (int axis = 0; axis < 4; ++axis)
    FT_CHECK_ARG(x.size(axis) >= 1 && x.size(axis) <= INT_MAX, "[", kOp, "] every dim of ", name,
                 " must be in [1, 2^31), got ", describe_attention_operand(x));
  const int64_t D = x.size(3);
  FT_CHECK_ARG(D == 64 || D == 128 || D == 256, "[", kOp, "] head dim D must be 64, 128 or 256, got ", name, " ",
               describe_attention_operand(x));
  if (x.is_cuda()) {
    FT_CHECK_ARG(x.dtype() == DType::BF16, "[", kOp, "] CUDA takes bf16 q, k, v, got ", name, " ",
                 describe_attention_operand(x));
#if defined(FT_WITH_CUDA)
#if defined(FT_FLASH_WGMMA)
    constexpr const char* kMissing = "this GPU is not compute capability 9.0";
#else
    constexpr const char* kMissing = "this build has no sm_90a code";
#endif
    FT_CHECK_ARG(cuda::flash_sm90a_device(), "[", kOp, "] needs FP8 tensor cores through sm_90a wgmma: a compute ",
                 "capability 9.0 GPU (H100, H200) and a build whose CMAKE_CUDA_ARCHITECTURES lists 90a; ", kMissing,
                 " (", x.device(), ")");
#else
    FT_CHECK_ARG(false, "[", kOp, "] flashtrain was built without CUDA");
#endif
  } else {
    FT_CHECK_ARG(x.dtype() == DType::F32 || x.dtype() == DType::F64 || x.dtype() == DType::BF16, "[", kOp,
                 "] the CPU emulation takes f32, f64 or bf16, got ", name, " ", describe_attention_operand(x));
  }
}

void check_options(const AttentionOptions& opts) {
  FT_CHECK_ARG(opts.dropout_p == 0.f, "[", kOp, "] is an inference path without dropout: dropout_p must be 0, got ",
               opts.dropout_p);
  FT_CHECK_ARG(opts.block_size == 0, "[", kOp, "] has no block-sparse mode, got block_size ", opts.block_size);
  FT_CHECK_ARG(!opts.doc_start.defined(), "[", kOp, "] has no document mask: doc_start must be undefined");
  FT_CHECK_ARG(std::isfinite(opts.softmax_scale) && opts.softmax_scale >= 0.f, "[", kOp,
               "] softmax_scale must be finite and >= 0 (0 means 1/sqrt(D)), got ", opts.softmax_scale);
}

cpu::Fp8Quantized to_host(const Fp8QuantizedOperand& x) {
  return {x.bytes.to_vector<uint8_t>(), x.scales.to_vector<float>()};
}

}  // namespace

Fp8QuantizedOperand fp8_attention_quantize(const Tensor& x, Fp8Operand operand, const Fp8AttentionOptions& fp8) {
  check_input(operand_name(operand), x, x);
  Fp8QuantizedOperand r;
  r.operand = operand;
  r.B = static_cast<int>(x.size(0)), r.T = static_cast<int>(x.size(1)), r.H = static_cast<int>(x.size(2)),
  r.D = static_cast<int>(x.size(3));
  const int T_pad = fp8_padded_rows(r.T);
  const Shape bytes_shape{static_cast<int64_t>(r.B) * r.H, T_pad, r.D};
  const Shape scales_shape{static_cast<int64_t>(r.B) * r.H, T_pad / tile_rows(operand)};
  const bool rotate = fp8.hadamard && operand != Fp8Operand::kV;
  uint32_t signs[8];
  cpu::fp8_hadamard_signs(fp8.hadamard_seed, r.D, signs);
  dispatch(
      x.device(),
      [&] {
        // The bf16 values the GPU path would read, as floats.
        const Tensor xf = cast(cast(x.contiguous(), DType::BF16), DType::F32);  // (B, T, H, D)
        const cpu::Fp8Quantized qt = cpu::fp8_quantize(xf.data<float>(), r.B, r.T, r.H, r.D, operand,
                                                       !fp8.block_quant, rotate ? signs : nullptr);
        r.bytes = Tensor::from_vector(qt.bytes, bytes_shape);
        r.scales = Tensor::from_vector(qt.scales, scales_shape);
      },
      [&](Stream s) {
#if defined(FT_WITH_CUDA)
        r.bytes = Tensor::empty(bytes_shape, DType::U8, x.device());
        r.scales = Tensor::empty(scales_shape, DType::F32, x.device());
        Tensor amax = fp8.block_quant ? Tensor() : Tensor::empty({1}, DType::F32, x.device());
        Fp8QuantParams p;
        p.x = static_cast<const uint16_t*>(x.data_ptr());
        p.batch_stride = x.stride(0), p.row_stride = x.stride(1), p.head_stride = x.stride(2);
        p.out = r.bytes.data<uint8_t>();
        p.scales = r.scales.data<float>();
        p.amax = amax.defined() ? amax.data<float>() : nullptr;
        p.per_tensor = !fp8.block_quant;
        p.hadamard = rotate;
        for (int w = 0; w < 8; ++w) p.sign_bits[w] = signs[w];
        p.operand = operand;
        p.B = r.B, p.H = r.H, p.T = r.T, p.D = r.D;
        cuda::fp8_quantize(p, s);
#else
        (void)s;
#endif
      });
  return r;
}

Tensor fp8_attention_forward_quantized(const Fp8QuantizedOperand& q, const Fp8QuantizedOperand& k,
                                       const Fp8QuantizedOperand& v, const AttentionOptions& opts,
                                       DType out_dtype) {
  check_options(opts);
  FT_CHECK_ARG(q.operand == Fp8Operand::kQ && k.operand == Fp8Operand::kK && v.operand == Fp8Operand::kV, "[", kOp,
               "] operands must be quantised as q, k and v, in that order");
  for (const Fp8QuantizedOperand* x : {&k, &v})
    FT_CHECK_ARG(x->B == q.B && x->T == q.T && x->H == q.H && x->D == q.D && x->bytes.device() == q.bytes.device(),
                 "[", kOp, "] ", operand_name(x->operand), " (", x->B, ", ", x->T, ", ", x->H, ", ", x->D, ") on ",
                 x->bytes.device(), " does not match q (", q.B, ", ", q.T, ", ", q.H, ", ", q.D, ") on ",
                 q.bytes.device());
  const Device device = q.bytes.device();
  const Shape bthd{q.B, q.T, q.H, q.D};
  AttentionParams cfg;  // the emulation's configuration
  cfg.B = q.B, cfg.T = q.T, cfg.H = q.H, cfg.D = q.D, cfg.causal = opts.causal;
  cfg.softmax_scale = opts.softmax_scale > 0.f ? opts.softmax_scale : 1.f / std::sqrt(static_cast<float>(q.D));
  return dispatch(
      device,
      [&] {
        const auto qd = cpu::fp8_dequantize(to_host(q), q.B, q.T, q.H, q.D, Fp8Operand::kQ);
        const auto kd = cpu::fp8_dequantize(to_host(k), q.B, q.T, q.H, q.D, Fp8Operand::kK);
        const auto vd = cpu::fp8_dequantize(to_host(v), q.B, q.T, q.H, q.D, Fp8Operand::kV);
        std::vector<double> o(qd.size());
        cpu::fp8_attention_emulate(cfg, qd.data(), kd.data(), vd.data(), o.data());
        return cast(Tensor::from_vector(o, bthd), out_dtype);
      },
      [&](Stream s) {
        FT_CHECK_ARG(out_dtype == DType::BF16, "[", kOp, "] CUDA writes bf16 output, asked for ", out_dtype);
        Tensor out = Tensor::empty(bthd, DType::BF16, device);  // (B, T, H, D)
#if defined(FT_WITH_CUDA)
        cuda::flash_fp8_forward(fp8_attention_params(q, k, v, out, cfg.softmax_scale, opts.causal), s);
#else
        (void)s;
#endif
        return out;
      });
}

Fp8AttentionParams fp8_attention_params(const Fp8QuantizedOperand& q, const Fp8QuantizedOperand& k,
                                        const Fp8QuantizedOperand& v, const Tensor& out, float softmax_scale,
                                        bool causal) {
  Fp8AttentionParams p;
  p.q = q.bytes.data<uint8_t>(), p.k = k.bytes.data<uint8_t>(), p.v = v.bytes.data<uint8_t>();
  p.q_scale = q.scales.data<float>(), p.k_scale = k.scales.data<float>(), p.v_scale = v.scales.data<float>();
  p.o = static_cast<uint16_t*>(out.data_ptr());
  p.o_batch_stride = out.stride(0), p.o_row_stride = out.stride(1), p.o_head_stride = out.stride(2);
  p.B = q.B, p.H = q.H, p.T = q.T, p.D = q.D;
  p.softmax_scale = softmax_scale;
  p.causal = causal;
  return p;
}

Tensor fp8_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& opts,
                             const Fp8AttentionOptions& fp8) {
  check_options(opts);
  check_input("q", q, q);
  check_input("k", k, q);
  check_input("v", v, q);
  return fp8_attention_forward_quantized(fp8_attention_quantize(q, Fp8Operand::kQ, fp8),
                                         fp8_attention_quantize(k, Fp8Operand::kK, fp8),
                                         fp8_attention_quantize(v, Fp8Operand::kV, fp8), opts, q.dtype());
}

}  // namespace ft::ops
