// The generator that hands out Philox states. Each stochastic op asks for the state it starts
// from and says how many counter offsets it consumes; nothing else is hidden in it, so saving
// {seed, offset} in a checkpoint is saving the whole random state.
#pragma once

#include <cstdint>

#include "core/philox.h"

namespace ft {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : state_{seed, offset} {}

  // The state an op starts from; advances the offset past what the op consumes.
  PhiloxState next(uint64_t consumed) {
    const PhiloxState s = state_;
    state_.offset += consumed;
    return s;
  }
  PhiloxState state() const { return state_; }
  void set_state(PhiloxState s) { state_ = s; }

 private:
  PhiloxState state_;
};

}  // namespace ft
