#include "nn/dropout.h"

#include "autograd/functions/dropout.h"
#include "ops/dropout.h"

namespace ft::nn {

Dropout::Dropout(double p, Generator& gen) : p_(p), gen_(gen) {
  FT_CHECK_ARG(p >= 0 && p < 1, "[dropout] p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) const {
  if (!is_training() || p_ == 0) return x;
  return autograd::dropout(x, static_cast<float>(p_), gen_.next(ops::kDropoutOffsets));
}

Dropout::Draw Dropout::draw() const {
  if (!is_training() || p_ == 0) return {};
  return {static_cast<float>(p_), gen_.next(ops::kDropoutOffsets)};
}

}  // namespace ft::nn
