#include "ops/attention.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <utility>

#include "ops/attention_checks.h"
#include "ops/attention_params.h"
#include "ops/cpu/attention_reference.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

#if defined(FT_WITH_CUDA)
#include "core/cuda/context.h"
#include "ops/cuda/attention/flash_attention.h"
#include "ops/cuda/naive_attention.h"
#endif
#include "ops/cuda/attention_kv_sum.h"

namespace ft::ops {

// "(2, 5, 4, 8) strides (480, 96, 8, 1) bf16 on cuda:0": what every layout error shows.
std::string describe_attention_operand(const Tensor& t) {
  return str(t.shape(), " strides ", t.strides(), " ", t.dtype(), " on ", t.device());
}

static bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// A (B, T, H, D) or (B, T, H_kv, D) operand: `shape`, the dtype and device of q, a contiguous last
// dim, and on CUDA the kernels' stride and alignment rules.
void check_attention_operand(const char* op, const char* name, const Tensor& t, const Tensor& q, const Shape& shape) {
  FT_CHECK_ARG(t.defined(), "[", op, "] ", name, " is undefined");
  FT_CHECK_ARG(t.shape() == shape && t.dtype() == q.dtype() && t.device() == q.device(), "[", op, "] ", name, " ",
               describe_attention_operand(t), " does not match q ", describe_attention_operand(q),
               " (expected shape ", shape, ")");
  FT_CHECK_ARG(t.stride(3) == 1 || t.size(3) == 1, "[", op, "] ", name, " needs a contiguous last dim (D), got ",
               describe_attention_operand(t));
  if (!t.is_cuda()) return;
  for (int axis = 0; axis < 3; ++axis)  // a dim of size 1 is never stepped along: its stride is moot
    FT_CHECK_ARG(t.size(axis) == 1 || t.stride(axis) % 8 == 0, "[", op, "] ", name, " batch, time and head strides must be multiples ",
                 "of 8 elements (16-byte rows), got ", describe_attention_operand(t));
  FT_CHECK_ARG(aligned16(t), "[", op, "] ", name, " must start on a 16-byte boundary, got ", describe_attention_operand(t),
               " at element offset ", t.offset());
}

void check_attention_operand(const char* op, const char* name, const Tensor& t, const Tensor& q) {
  check_attention_operand(op, name, t, q, q.shape());
}

namespace {

const auto& describe = describe_attention_operand;

// CPU tiles of the tiled flash reference. The function does not depend on the tiling
// (tests/ops/attention_cpu_test checks it), so one size serves every head dim.
constexpr int kCpuBlockM = 64;
constexpr int kCpuBlockN = 64;

struct Dims {
  int B, T, H, D;
  int H_kv;  // K/V heads: H for multi-head attention, a divisor of H for grouped-query attention
};

// The document mask's contract (ops/attention.h); its values only where they are on the CPU.
void check_doc_start(const char* op, const AttentionOptions& opts, const Tensor& q, const Dims& d) {
  const Tensor& ds = opts.doc_start;
  if (!ds.defined()) return;
  FT_CHECK_ARG(opts.causal, "[", op, "] a document mask (doc_start) needs causal attention: it holds where each ",
               "query's document starts, not where it ends");
  FT_CHECK_ARG(ds.shape() == Shape({d.B, d.T}) && ds.dtype() == DType::I32 && ds.device() == q.device() &&
                   ds.is_contiguous(),
               "[", op, "] doc_start must be contiguous (B, T) = (", d.B, ", ", d.T, ") i32 on ", q.device(),
               ", got ", describe(ds));
  if (ds.is_cuda()) return;
  const int32_t* v = ds.data<int32_t>();
  for (int b = 0; b < d.B; ++b)
    for (int t = 0; t < d.T; ++t) {
      const int32_t s = v[static_cast<int64_t>(b) * d.T + t];
      const int32_t prev = t > 0 ? v[static_cast<int64_t>(b) * d.T + t - 1] : 0;
      FT_CHECK_ARG(s >= prev && s <= t, "[", op, "] doc_start[", b, ", ", t, "] = ", s, " must be in [doc_start[",
                   b, ", ", t - 1, "] = ", prev, ", ", t, "] (non-decreasing, at most the position)");
    }
}

Dims check_inputs(const char* op, bool flash, const Tensor& q, const Tensor& k, const Tensor& v,
                  const AttentionOptions& opts) {
  FT_CHECK_ARG(q.defined() && k.defined() && v.defined(), "[", op, "] q, k and v must be defined");
  FT_CHECK_ARG(q.dim() == 4, "[", op, "] q must be (B, T, H, D), got ", describe(q));
  const DType t = q.dtype();
  if (q.is_cuda() && flash) {
    // The flash kernels are mma.sync m16n8k16 tensor-core tiles, whose operands are 16-bit; an f32
    // flash would be TF32 (not fp32) or CUDA-core FFMA. Naive attention runs f32 through cuBLAS.
    FT_CHECK_ARG(is_half(t), "[", op, "] CUDA takes bf16 or f16 (the flash kernels' tensor-core tiles are 16-bit), got q ",
                 describe(q), "; f32 on a GPU runs with naive attention (use_flash_attention: false)");
    FT_CHECK_ARG(cuda_flash_takes_head_dim(q.size(3)), "[", op, "] head dim D = ", q.size(3),
                 ": the CUDA flash kernels take ", kCudaFlashHeadDims, " (naive attention takes any), got q ",
                 describe(q));
  } else if (q.is_cuda()) {
    FT_CHECK_ARG(is_half(t) || t == DType::F32, "[", op, "] CUDA takes f32, bf16 or f16, got q ", describe(q));
  } else {
    FT_CHECK_ARG(is_floating(t), "[", op, "] takes f32, f64, bf16 or f16 on the CPU, got q ", describe(q));
  }
  check_attention_operand(op, "q", q, q, q.shape());
  for (int axis = 0; axis < 4; ++axis)
    FT_CHECK_ARG(q.size(axis) >= 1 && q.size(axis) <= INT_MAX, "[", op, "] every dim of q must be in [1, 2^31), got ",
                 describe(q));
  // Grouped-query attention: k and v carry H_kv heads, a divisor of q's H (H_kv = 1: multi-query).
  FT_CHECK_ARG(k.dim() == 4 && k.size(2) >= 1, "[", op, "] k must be (B, T, H_kv, D), got ", describe(k));
  FT_CHECK_ARG(q.size(2) % k.size(2) == 0, "[", op, "] n_heads (q) must be a multiple of n_kv_heads (k, v): q ",
               describe(q), ", k ", describe(k));
  const Shape kv_shape{q.size(0), q.size(1), k.size(2), q.size(3)};
  check_attention_operand(op, "k", k, q, kv_shape);
  check_attention_operand(op, "v", v, q, kv_shape);
  const Dims d{static_cast<int>(q.size(0)), static_cast<int>(q.size(1)), static_cast<int>(q.size(2)),
               static_cast<int>(q.size(3)), static_cast<int>(k.size(2))};
  FT_CHECK_ARG(opts.dropout_p >= 0.f && opts.dropout_p <= 1.f, "[", op, "] dropout_p must be in [0, 1], got ",
               opts.dropout_p);
  FT_CHECK_ARG(std::isfinite(opts.softmax_scale) && opts.softmax_scale >= 0.f, "[", op,
               "] softmax_scale must be finite and >= 0 (0 means 1/sqrt(D)), got ", opts.softmax_scale);
  FT_CHECK_ARG(opts.block_size >= 0, "[", op, "] block_size must be >= 0, got ", opts.block_size);
  if (opts.block_size > 0)
    FT_CHECK_ARG(opts.window_blocks >= 1 && opts.global_blocks >= 0, "[", op, "] block-sparse mode (block_size ",
                 opts.block_size, ") needs window_blocks >= 1 and global_blocks >= 0, got ", opts.window_blocks,
                 " and ", opts.global_blocks);
  check_doc_start(op, opts, q, d);
  return d;
}

void check_gradients(const char* op, const Tensor& q, const Tensor& out, const Tensor& lse, const Tensor& dout,
                     const Tensor& dq, const Tensor& dk, const Tensor& dv, const Dims& d) {
  check_attention_operand(op, "out", out, q, q.shape());
  check_attention_operand(op, "dout", dout, q, q.shape());
  check_attention_operand(op, "dq", dq, q, q.shape());
  check_attention_operand(op, "dk", dk, q, Shape{d.B, d.T, d.H_kv, d.D});
  check_attention_operand(op, "dv", dv, q, Shape{d.B, d.T, d.H_kv, d.D});
  const DType lse_dtype = is_half(q.dtype()) ? DType::F32 : q.dtype();
  FT_CHECK_ARG(lse.defined() && lse.shape() == Shape({d.B, d.H, d.T}) && lse.dtype() == lse_dtype &&
                   lse.device() == q.device() && lse.is_contiguous(),
               "[", op, "] lse must be the forward's contiguous (B, H, T) = (", d.B, ", ", d.H, ", ", d.T, ") ",
               lse_dtype, " on ", q.device(), ", got ", lse.defined() ? describe(lse) : std::string("undefined"));
}

AttentionParams make_params(const Dims& d, const AttentionOptions& opts, DType dtype) {
  AttentionParams p;
  p.B = d.B;
  p.T = d.T;
  p.H = d.H;
  p.H_kv = d.H_kv;
  p.D = d.D;
  p.softmax_scale = opts.softmax_scale > 0.f ? opts.softmax_scale : 1.f / std::sqrt(static_cast<float>(d.D));
  p.causal = opts.causal;
  // f32 and f64 map to kF32: CUDA naive computes f32 in f32; the CPU runs both through the float64
  // reference, which ignores the dtype.
  p.dtype = dtype == DType::F16 ? AttentionDType::kF16 : dtype == DType::BF16 ? AttentionDType::kBF16 : AttentionDType::kF32;
  p.dropout = make_dropout_params(opts.philox, opts.dropout_p);
  p.block_size = opts.block_size;
  p.window_blocks = opts.window_blocks;
  p.global_blocks = opts.global_blocks;
  p.doc_start = opts.doc_start.defined() ? opts.doc_start.data<int32_t>() : nullptr;
  return p;
}

void strides_of(const Tensor& t, int64_t& batch, int64_t& row, int64_t& head) {
  batch = t.stride(0);
  row = t.stride(1);
  head = t.stride(2);
}

void set_forward_pointers(AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& lse) {
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.lse = lse.data<float>();
  strides_of(q, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
  strides_of(k, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
  strides_of(v, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
  strides_of(out, p.o_batch_stride, p.o_row_stride, p.o_head_stride);
}

void set_backward_pointers(AttentionParams& p, const Tensor& dout, const Tensor& dq, const Tensor& dk,
                           const Tensor& dv) {
  p.dout = dout.data_ptr();
  p.dq = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  strides_of(dout, p.do_batch_stride, p.do_row_stride, p.do_head_stride);
  strides_of(dq, p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride);
  strides_of(dk, p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride);
  strides_of(dv, p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
}

// ---------------------------------------------------------------- CPU: the references
// They take contiguous (B, T, H, D) arrays, so strided operands are gathered here and gradients
// scattered back with copy_ (a copy on the CPU costs nothing that matters).

Tensor contiguous_as(const Tensor& t, DType dtype) { return cast(t.contiguous(), dtype); }

// dst (any strides, a handle taken by value: copy_ writes through it) = src in dst's dtype.
void write_into(Tensor dst, const Tensor& src) { dst.copy_(cast(src, dst.dtype())); }

AttentionForward cpu_forward(bool flash, const AttentionParams& cfg, const Tensor& q, const Tensor& k,
                             const Tensor& v) {
  const Shape bthd{cfg.B, cfg.T, cfg.H, cfg.D}, bht{cfg.B, cfg.H, cfg.T};
  AttentionForward r;
  if (is_half(q.dtype())) {  // the references that reproduce the CUDA kernels' rounding
    const Tensor qf = contiguous_as(q, DType::F32), kf = contiguous_as(k, DType::F32),
                 vf = contiguous_as(v, DType::F32);  // q (B, T, H, D), k, v (B, T, H_kv, D); exact
    Tensor of = Tensor::empty(bthd, DType::F32);     // (B, T, H, D), rounded to q's dtype
    r.lse = Tensor::empty(bht, DType::F32);          // (B, H, T)
    if (flash)
      cpu::flash_tiled_forward(cfg, kCpuBlockM, kCpuBlockN, qf.data<float>(), kf.data<float>(), vf.data<float>(),
                               of.data<float>(), r.lse.data<float>());
    else
      cpu::naive_lowp_forward(cfg, qf.data<float>(), kf.data<float>(), vf.data<float>(), of.data<float>(),
                              r.lse.data<float>());
    r.out = cast(of, q.dtype());
    return r;
  }
  const Tensor qd = contiguous_as(q, DType::F64), kd = contiguous_as(k, DType::F64),
               vd = contiguous_as(v, DType::F64);  // (B, T, H, D)
  Tensor od = Tensor::empty(bthd, DType::F64);     // (B, T, H, D)
  Tensor lsed = Tensor::empty(bht, DType::F64);    // (B, H, T)
  cpu::attention_reference_forward(cfg, qd.data<double>(), kd.data<double>(), vd.data<double>(), od.data<double>(),
                                   lsed.data<double>());
  r.out = cast(od, q.dtype());
  r.lse = cast(lsed, q.dtype());
  return r;
}

void cpu_backward(bool flash, const AttentionParams& cfg, const Tensor& q, const Tensor& k, const Tensor& v,
                  const Tensor& out, const Tensor& lse, const Tensor& dout, const Tensor& dq, const Tensor& dk,
                  const Tensor& dv) {
  const Shape bthd{cfg.B, cfg.T, cfg.H, cfg.D}, bthd_kv{cfg.B, cfg.T, cfg.H_kv, cfg.D};
  if (is_half(q.dtype())) {
    const Tensor qf = contiguous_as(q, DType::F32), kf = contiguous_as(k, DType::F32),
                 vf = contiguous_as(v, DType::F32), of = contiguous_as(out, DType::F32),
                 dof = contiguous_as(dout, DType::F32);  // q, out, dout (B, T, H, D); k, v (B, T, H_kv, D)
    Tensor dqf = Tensor::empty(bthd, DType::F32);  // (B, T, H, D)
    Tensor dkf = Tensor::empty(bthd_kv, DType::F32), dvf = Tensor::empty(bthd_kv, DType::F32);  // (B, T, H_kv, D)
    if (flash)
      cpu::flash_tiled_backward(cfg, kCpuBlockM, kCpuBlockN, qf.data<float>(), kf.data<float>(), vf.data<float>(),
                                of.data<float>(), lse.data<float>(), dof.data<float>(), dqf.data<float>(),
                                dkf.data<float>(), dvf.data<float>());
    else
      cpu::naive_lowp_backward(cfg, qf.data<float>(), kf.data<float>(), vf.data<float>(), dof.data<float>(),
                               dqf.data<float>(), dkf.data<float>(), dvf.data<float>());
    write_into(dq, dqf);
    write_into(dk, dkf);
    write_into(dv, dvf);
    return;
  }
  // The float64 reference recomputes P from q and k; out and lse are not needed.
  const Tensor qd = contiguous_as(q, DType::F64), dod = contiguous_as(dout, DType::F64);  // (B, T, H, D)
  const Tensor kd = contiguous_as(k, DType::F64), vd = contiguous_as(v, DType::F64);     // (B, T, H_kv, D)
  Tensor dqd = Tensor::empty(bthd, DType::F64);  // (B, T, H, D)
  Tensor dkd = Tensor::empty(bthd_kv, DType::F64), dvd = Tensor::empty(bthd_kv, DType::F64);  // (B, T, H_kv, D)
  cpu::attention_reference_backward(cfg, qd.data<double>(), kd.data<double>(), vd.data<double>(), dod.data<double>(),
                                    dqd.data<double>(), dkd.data<double>(), dvd.data<double>());
  write_into(dq, dqd);
  write_into(dk, dkd);
  write_into(dv, dvd);
}

// ---------------------------------------------------------------- CUDA: the launchers
// Workspaces and naive's T x T buffers come from Tensor::empty, so the caching allocator owns them
// and their reuse is ordered on the device's one stream. The launcher headers are not declared with
// FT_CUDA_LAUNCHER and naive needs the cuBLAS handle, hence the one guarded block of this file.

#if defined(FT_WITH_CUDA)
void cuda_flash_forward(const AttentionParams& p, Stream s) { cuda::flash_attention_forward(p, s); }
void cuda_flash_backward(const AttentionParams& p, Stream s, bool deterministic, int* dq_semaphore) {
  cuda::flash_attention_backward(p, s, {deterministic, dq_semaphore});
}
// Element counts of the flash backward's dq_accum and dq_semaphore workspaces (0: not used).
std::pair<int64_t, int64_t> flash_dq_workspace(const AttentionParams& p, bool deterministic) {
  const cuda::FlashBackwardNeeds needs = cuda::flash_backward_needs(p, deterministic);
  const cuda::FlashBackwardWorkspace ws = cuda::flash_attention_backward_workspace(p);
  return {needs.dq_accum ? (needs.stored_ds ? ws.ds_floats : ws.dq_accum_floats) : 0,
          needs.dq_semaphore ? ws.dq_semaphore_ints : 0};
}
void cuda_naive_forward(const AttentionParams& p, const cuda::NaiveAttentionBuffers& buf, Device d, Stream s) {
  cuda::naive_attention_forward(p, buf, cuda::context(d.index).blas, s);
}
void cuda_naive_backward(const AttentionParams& p, const cuda::NaiveAttentionBuffers& buf, Device d, Stream s) {
  cuda::naive_attention_backward(p, buf, cuda::context(d.index).blas, s);
}
#else
namespace cuda {
struct NaiveAttentionBuffers {
  float* scores = nullptr;
  void* probs = nullptr;
  void* probs_dropped = nullptr;
  void* dscores = nullptr;
};
}  // namespace cuda
[[noreturn]] void no_cuda(const char* op) { throw Error(str("[", op, "] flashtrain was built without CUDA")); }
void cuda_flash_forward(const AttentionParams&, Stream) { no_cuda("flash_attention_forward"); }
void cuda_flash_backward(const AttentionParams&, Stream, bool, int*) { no_cuda("flash_attention_backward"); }
std::pair<int64_t, int64_t> flash_dq_workspace(const AttentionParams&, bool) { return {0, 0}; }
void cuda_naive_forward(const AttentionParams&, const cuda::NaiveAttentionBuffers&, Device, Stream) {
  no_cuda("naive_attention_forward");
}
void cuda_naive_backward(const AttentionParams&, const cuda::NaiveAttentionBuffers&, Device, Stream) {
  no_cuda("naive_attention_backward");
}
#endif

// dk or dv (B, T, H_kv, D) = the group sums of the kernels' per-query-head partials (B, T, H, D).
void sum_kv_groups(const Dims& d, const Tensor& partial, const Tensor& out, Stream s) {
  ft::cuda::AttentionKvSumParams kp;
  kp.partial = partial.data_ptr();
  kp.out = out.data_ptr();
  strides_of(out, kp.out_batch_stride, kp.out_row_stride, kp.out_head_stride);
  kp.B = d.B, kp.T = d.T, kp.H = d.H, kp.H_kv = d.H_kv, kp.D = d.D;
  kp.dtype = out.dtype();
  ft::cuda::attention_kv_sum(kp, s);
}

AttentionForward forward(const char* op, bool flash, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttentionOptions& opts) {
  const Dims d = check_inputs(op, flash, q, k, v, opts);
  AttentionParams p = make_params(d, opts, q.dtype());
  return dispatch(
      q.device(), [&] { return cpu_forward(flash, p, q, k, v); },
      [&](Stream s) {
        AttentionForward r;
        r.out = Tensor::empty({d.B, d.T, d.H, d.D}, q.dtype(), q.device());  // (B, T, H, D)
        r.lse = Tensor::empty({d.B, d.H, d.T}, DType::F32, q.device());       // (B, H, T)
        set_forward_pointers(p, q, k, v, r.out, r.lse);
        if (flash) {
          cuda_flash_forward(p, s);
          return r;
        }
        const Shape bhtt{d.B, d.H, d.T, d.T};
        const Tensor scores = Tensor::empty(bhtt, DType::F32, q.device());  // (B, H, T, T) S
        r.probs = Tensor::empty(bhtt, q.dtype(), q.device());                // (B, H, T, T) P
        // (B, H, T, T) P o Z, only with dropout (without it the kernels use P itself)
        const Tensor dropped = p.dropout.threshold ? Tensor::empty(bhtt, q.dtype(), q.device()) : Tensor();
        cuda::NaiveAttentionBuffers buf;
        buf.scores = scores.data<float>();
        buf.probs = r.probs.data_ptr();
        buf.probs_dropped = dropped.defined() ? dropped.data_ptr() : nullptr;
        cuda_naive_forward(p, buf, q.device(), s);
        return r;
      });
}

// The CUDA backward kernels of one call; p holds every pointer (dk, dv: where the kernels write).
void run_backward_kernels(const char* op, bool flash, AttentionParams& p, const Dims& d, const Tensor& q,
                          const Tensor& probs, const AttentionOptions& opts, Stream s) {
  if (flash) {
    const Tensor dsum = Tensor::empty({d.B, d.H, d.T}, DType::F32, q.device());  // (B, H, T)
    p.dsum = dsum.data<float>();
    // fp32 dQ sums (their own layout, T rounded up to whole tiles: flash_dq_accum.cuh) and
    // (B, H, ceil(T / 32), 4) dQ order counters, each only where the mode uses it (the
    // deterministic backward without dropout needs neither); sizes from the launcher
    const auto [accum_n, semaphore_n] = flash_dq_workspace(p, opts.deterministic);
    const Tensor dq_accum = accum_n ? Tensor::empty({accum_n}, DType::F32, q.device()) : Tensor();
    const Tensor dq_semaphore = semaphore_n ? Tensor::empty({semaphore_n}, DType::I32, q.device()) : Tensor();
    p.dq_accum = dq_accum.defined() ? dq_accum.data<float>() : nullptr;
    cuda_flash_backward(p, s, opts.deterministic, dq_semaphore.defined() ? dq_semaphore.data<int32_t>() : nullptr);
    return;
  }
  const Shape bhtt{d.B, d.H, d.T, d.T};
  FT_CHECK_ARG(probs.defined() && probs.shape() == bhtt && probs.dtype() == q.dtype() &&
                   probs.device() == q.device() && probs.is_contiguous(),
               "[", op, "] needs the forward's probabilities P, contiguous (B, H, T, T) ", q.dtype(), " on ",
               q.device(), ", got ", probs.defined() ? describe(probs) : std::string("undefined"));
  const Tensor scores = Tensor::empty(bhtt, DType::F32, q.device());  // (B, H, T, T) dP scratch
  const Tensor dscores = Tensor::empty(bhtt, q.dtype(), q.device());  // (B, H, T, T) dS
  // (B, H, T, T) P o Z scratch, only with dropout
  const Tensor dropped = p.dropout.threshold ? Tensor::empty(bhtt, q.dtype(), q.device()) : Tensor();
  cuda::NaiveAttentionBuffers buf;
  buf.scores = scores.data<float>();
  buf.probs = probs.data_ptr();
  buf.probs_dropped = dropped.defined() ? dropped.data_ptr() : nullptr;
  buf.dscores = dscores.data_ptr();
  cuda_naive_backward(p, buf, q.device(), s);
}

void backward(const char* op, bool flash, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
              const Tensor& lse, const Tensor& probs, const Tensor& dout, const AttentionOptions& opts,
              const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const Dims d = check_inputs(op, flash, q, k, v, opts);
  check_gradients(op, q, out, lse, dout, dq, dk, dv, d);
  AttentionParams p = make_params(d, opts, q.dtype());
  dispatch(
      q.device(), [&] { cpu_backward(flash, p, q, k, v, out, lse, dout, dq, dk, dv); },
      [&](Stream s) {
        // Grouped K/V heads: the kernels write each query head's dK, dV into (B, T, H, D) workspaces
        // that sum_kv_groups folds into dk, dv (a fixed order: deterministic); multi-head attention
        // writes dk, dv directly and allocates nothing more.
        const bool grouped = d.H_kv != d.H;
        const Shape bthd{d.B, d.T, d.H, d.D};
        const Tensor dk_part = grouped ? Tensor::empty(bthd, q.dtype(), q.device()) : dk;  // (B, T, H, D)
        const Tensor dv_part = grouped ? Tensor::empty(bthd, q.dtype(), q.device()) : dv;  // (B, T, H, D)
        set_forward_pointers(p, q, k, v, out, lse);
        set_backward_pointers(p, dout, dq, dk_part, dv_part);
        run_backward_kernels(op, flash, p, d, q, probs, opts, s);
        if (!grouped) return;
        sum_kv_groups(d, dk_part, dk, s);
        sum_kv_groups(d, dv_part, dv, s);
      });
}

}  // namespace

AttentionForward flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionOptions& opts) {
  return forward("flash_attention", true, q, k, v, opts);
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout, const AttentionOptions& opts,
                              const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  backward("flash_attention_backward", true, q, k, v, out, lse, Tensor(), dout, opts, dq, dk, dv);
}

AttentionForward naive_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionOptions& opts) {
  return forward("naive_attention", false, q, k, v, opts);
}

void naive_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionForward& fwd,
                              const Tensor& dout, const AttentionOptions& opts, const Tensor& dq,
                              const Tensor& dk, const Tensor& dv) {
  backward("naive_attention_backward", false, q, k, v, fwd.out, fwd.lse, fwd.probs, dout, opts, dq, dk, dv);
}

}  // namespace ft::ops
