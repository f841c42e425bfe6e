#include "nn/embedding.h"

#include "autograd/functions/embedding.h"

namespace ft::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t dim) {
  register_parameter("weight", weight, Tensor::zeros({num_embeddings, dim}, DType::F32));
}

Tensor Embedding::forward(const Tensor& ids) const { return autograd::embedding(ids, weight); }

}  // namespace ft::nn
