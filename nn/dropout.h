// Dropout in training mode, the identity in eval mode (and for p = 0). Each training call draws
// its PhiloxState from the shared Generator, so the model's whole randomness is that generator's
// (seed, offset), which a checkpoint saves; eval calls draw nothing.
#pragma once

#include "core/random.h"
#include "nn/module.h"

namespace ft::nn {

class Dropout : public Module {
 public:
  // `gen` must outlive the module (the model owns both).
  Dropout(double p, Generator& gen);
  Tensor forward(const Tensor& x) const;
  double p() const { return p_; }

  // For an op that fuses this dropout (autograd::residual_layernorm): the p and PhiloxState to
  // apply. In training with p > 0 the state is drawn exactly as forward() draws it, so fused and
  // unfused models consume the generator alike; otherwise p = 0 and nothing is drawn.
  struct Draw {
    float p = 0.f;
    PhiloxState state;
  };
  Draw draw() const;

 private:
  double p_;
  Generator& gen_;
};

}  // namespace ft::nn
