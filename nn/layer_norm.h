// LayerNorm over the last axis with a gain and a bias, both (C).
#pragma once

#include "nn/module.h"

namespace ft::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);  // weight 1, bias 0 (f32, CPU)
  Tensor forward(const Tensor& x) const;

  Tensor weight;  // (C)
  Tensor bias;    // (C)

 private:
  double eps_;
};

}  // namespace ft::nn
