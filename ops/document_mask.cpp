#include "ops/document_mask.h"

#include "ops/cpu/document_mask.h"
#include "ops/cuda/document_mask.h"
#include "ops/dispatch.h"

namespace ft::ops {

Tensor document_starts(const Tensor& tokens0, int32_t eot_token) {
  FT_CHECK_ARG(tokens0.defined() && tokens0.dim() == 2 && tokens0.dtype() == DType::I32,
               "[document_starts] tokens must be (B, T) int32, got ",
               tokens0.defined() ? str(tokens0.shape(), " ", tokens0.dtype()) : std::string("undefined"));
  FT_CHECK_ARG(tokens0.size(1) <= INT32_MAX, "[document_starts] T = ", tokens0.size(1),
               " does not fit the int32 positions");
  const Tensor tokens = tokens0.contiguous();                                          // (B, T)
  Tensor doc_start = Tensor::empty(tokens.shape(), DType::I32, tokens.device());  // (B, T)
  const int64_t rows = tokens.size(0), T = tokens.size(1);
  dispatch(
      tokens.device(),
      [&] { cpu::document_starts(tokens.data<int32_t>(), doc_start.data<int32_t>(), rows, T, eot_token); },
      [&](Stream s) {
        cuda::DocumentStartsParams p;
        p.tokens = tokens.data<int32_t>();
        p.doc_start = doc_start.data<int32_t>();
        p.rows = rows;
        p.T = T;
        p.eot_token = eot_token;
        cuda::document_starts(p, s);
      });
  return doc_start;
}

}  // namespace ft::ops
