// Gradient check against float64 central differences on the CPU.
//
// `fn` maps inputs to one output tensor. gradcheck casts the inputs to f64 on the CPU, runs fn
// and backward with a random (fixed-seed) upstream gradient, and compares each analytic input
// gradient with (L(x + h) - L(x - h)) / 2h where L = sum(out * upstream), computed in float64.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ft::autograd {

struct GradcheckOptions {
  double step = 1e-6;
  double atol = 1e-7;
  double rtol = 1e-5;
  uint64_t seed = 1234;
  // Inputs (by index) whose gradient is not checked, e.g. integer indices.
  std::vector<int> skip;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string message;  // which input and element failed first, with both values
};

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts = {});

}  // namespace ft::autograd
