// Validation loss: the mean cross-entropy of the model over the first `max_batches` batches of a
// loader (rewound to its start first), in eval mode (no dropout) without a graph. Deterministic:
// the same weights give the same value, and the model's generator is not touched.
#pragma once

#include <cstdint>

#include "data/loader.h"
#include "nn/gpt.h"

namespace ft {

struct EvalResult {
  double loss = 0;  // mean over the batches (each batch's mean over its B*T targets)
  double ppl = 0;   // exp(loss)
  int64_t batches = 0;
  int64_t tokens = 0;
};

// max_batches <= 0 or above the loader's steps_per_epoch: one whole pass. The model's train/eval
// mode is restored afterwards.
EvalResult evaluate(nn::GPT& model, Loader& loader, int64_t max_batches, Device device);

}  // namespace ft
