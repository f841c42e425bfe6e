#include "train/evaluate.h"

#include <cmath>

#include "autograd/variable.h"
#include "ops/elementwise.h"
#include "train/device_batch.h"

namespace ft {

EvalResult evaluate(nn::GPT& model, Loader& loader, int64_t max_batches, Device device) {
  autograd::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  const int64_t per_pass = static_cast<int64_t>(loader.steps_per_epoch());
  const int64_t n = max_batches <= 0 || max_batches > per_pass ? per_pass : max_batches;
  loader.seek(LoaderPosition{});
  // Summed on the device; one host read at the end.
  const Tensor sum = Tensor::zeros({1}, DType::F32, device);
  EvalResult r;
  try {
    for (int64_t i = 0; i < n; ++i) {
      const DeviceBatch b = to_device(loader.next(), device);
      const Tensor loss = model.forward(b.inputs, b.targets, b.tokens()).loss;
      ops::add_(sum, ops::cast(loss, DType::F32).reshape({1}));
      r.tokens += b.tokens();
    }
  } catch (...) {
    model.train(was_training);
    throw;
  }
  model.train(was_training);
  r.batches = n;
  r.loss = sum.item() / static_cast<double>(n);
  r.ppl = std::exp(r.loss);
  return r;
}

}  // namespace ft
