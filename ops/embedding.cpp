#include "ops/embedding.h"

#include "ops/cpu/embedding.h"
#include "ops/cuda/embedding.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace ft::ops {
namespace {

// Checks the ids' dtype and device and returns them as contiguous int32.
Tensor checked_ids(const char* op, const Tensor& ids, Device device) {
  FT_CHECK_ARG(ids.dtype() == DType::I32 || ids.dtype() == DType::I64 || ids.dtype() == DType::U16, "[", op,
               "] ids must be i32, i64 or u16, got ", ids.dtype());
  FT_CHECK_ARG(ids.device() == device, "[", op, "] ids are on ", ids.device(), " but the table is on ", device);
  return cast(ids, DType::I32).contiguous();
}

void check_id_range(const char* op, const Tensor& ids, int64_t vocab) {
  const int32_t* p = ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i) {
    FT_CHECK_ARG(p[i] >= 0 && p[i] < vocab, "[", op, "] id ", p[i], " at position ", i, " is outside [0, ", vocab, ")");
  }
}

}  // namespace

Tensor embedding_forward(const Tensor& ids0, const Tensor& weight0) {
  FT_CHECK_ARG(weight0.dim() == 2, "[embedding] weight must be (V, C), got shape ", weight0.shape());
  FT_CHECK_ARG(is_floating(weight0.dtype()), "[embedding] weight must be floating point, got ", weight0.dtype());
  FT_CHECK_ARG(!(weight0.is_cuda() && weight0.dtype() == DType::F64), "[embedding] f64 is CPU-only, weight is on ",
               weight0.device());
  const Tensor ids = checked_ids("embedding", ids0, weight0.device());  // (...)
  const Tensor weight = weight0.contiguous();                           // (V, C)
  const int64_t V = weight.size(0), C = weight.size(1);
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());  // (..., C)
  if (out.numel() == 0) return out;
  dispatch(
      weight.device(),
      [&] {
        check_id_range("embedding", ids, V);
        cpu::embedding_forward(ids.data<int32_t>(), weight.data_ptr(), out.data_ptr(), ids.numel(), C * weight.itemsize());
      },
      [&](Stream s) {
        cuda::EmbeddingForwardParams p;
        p.ids = ids.data<int32_t>();
        p.weight = weight.data_ptr();
        p.out = out.data_ptr();
        p.n = ids.numel();
        p.vocab = V;
        p.cols = C;
        p.dtype = weight.dtype();
        cuda::embedding_forward(p, s);
      });
  return out;
}

void embedding_backward_(const Tensor& dweight, const Tensor& dout0, const Tensor& ids0) {
  FT_CHECK_ARG(dweight.dim() == 2 && dweight.is_contiguous(), "[embedding_backward] dweight must be a contiguous (V, C) tensor, got shape ",
               dweight.shape(), " strides ", dweight.strides());
  const DType gd = dout0.dtype() == DType::F64 ? DType::F64 : DType::F32;
  FT_CHECK_ARG(dweight.dtype() == gd, "[embedding_backward] dweight must be ", gd, " for ", dout0.dtype(), " dout, got ",
               dweight.dtype());
  FT_CHECK_ARG(is_floating(dout0.dtype()), "[embedding_backward] dout must be floating point, got ", dout0.dtype());
  FT_CHECK_ARG(dout0.device() == dweight.device(), "[embedding_backward] dout is on ", dout0.device(), " but dweight is on ",
               dweight.device());
  FT_CHECK_ARG(!(dout0.is_cuda() && dout0.dtype() == DType::F64), "[embedding_backward] f64 is CPU-only, dout is on ",
               dout0.device());
  const Tensor ids = checked_ids("embedding_backward", ids0, dweight.device());  // (...)
  const int64_t V = dweight.size(0), C = dweight.size(1);
  Shape expect = ids.shape();
  expect.push_back(C);
  FT_CHECK_ARG(dout0.shape() == expect, "[embedding_backward] dout ", dout0.shape(), " does not match ids ", ids.shape(),
               " and dweight ", dweight.shape(), " (expected ", expect, ")");
  const Tensor dout = dout0.contiguous();  // (..., C)
  if (dout.numel() == 0) return;
  dispatch(
      dweight.device(),
      [&] {
        check_id_range("embedding_backward", ids, V);
        const Tensor df = widen_half(dout);
        dispatch_cpu_float(df.dtype(), "embedding_backward", [&](auto tag) {
          using T = decltype(tag);
          cpu::embedding_backward<T>(ids.data<int32_t>(), df.data<T>(), dweight.data<T>(), ids.numel(), C);
        });
      },
      [&](Stream s) {
        cuda::EmbeddingBackwardParams p;
        p.ids = ids.data<int32_t>();
        p.dout = dout.data_ptr();
        p.dweight = dweight.data<float>();
        p.n = ids.numel();
        p.vocab = V;
        p.cols = C;
        p.dtype = dout.dtype();
        p.device = dweight.device().index;
        cuda::embedding_backward(p, s);
      });
}

Tensor embedding_backward(const Tensor& dout, const Tensor& ids, int64_t num_embeddings) {
  FT_CHECK_ARG(num_embeddings > 0 && dout.dim() >= 1, "[embedding_backward] needs num_embeddings > 0 and dout (..., C), got ",
               num_embeddings, " and shape ", dout.shape());
  const DType gd = dout.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Tensor dweight = Tensor::zeros({num_embeddings, dout.size(-1)}, gd, dout.device());  // (V, C)
  embedding_backward_(dweight, dout, ids);
  return dweight;
}

}  // namespace ft::ops
