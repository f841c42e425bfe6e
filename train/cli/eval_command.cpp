// `flashtrain eval`: mean loss and perplexity of a checkpoint over token shards, one full pass in
// file order without dropout (deterministic).
#include <iomanip>
#include <ostream>

#include "train/cli/command_options.h"
#include "train/device_choice.h"
#include "train/evaluate.h"
#include "train/inference_model.h"

namespace ft {

int run_eval(const EvalOptions& options, std::ostream& out, std::ostream&) {
  InferenceModel m = load_inference_model(options.checkpoint, options.fp8_attention);
  const LoaderOptions lo = file_order_loader_options(m, options.data, options.batch_size, options.seq_len, "eval");
  Loader loader(lo);
  const EvalResult r = evaluate(*m.model, loader, 0, m.device);
  // Six decimals: comparing two runs of one checkpoint (--attention fp8 against the model's own
  // attention) is what this line is read for, and their losses differ in the fifth.
  out << "loss " << std::fixed << std::setprecision(6) << r.loss << " | perplexity " << std::setprecision(2) << r.ppl
      << " | " << r.batches << " batches of " << options.batch_size << " x " << lo.seq_len << " (" << r.tokens << " tokens)"
      << (options.fp8_attention ? " | attention fp8 (e4m3, block scales, Hadamard-rotated Q and K)" : "") << "\n";
  return 0;
}

}  // namespace ft
