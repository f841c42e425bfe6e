// A lookup table: ids (...) int32 -> weight[ids] (..., C); weight (num_embeddings, C).
#pragma once

#include "nn/module.h"

namespace ft::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);  // zero weights (f32, CPU) until initialised
  Tensor forward(const Tensor& ids) const;

  Tensor weight;  // (num_embeddings, C)
};

}  // namespace ft::nn
