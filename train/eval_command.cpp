// `flashtrain eval`: mean loss and perplexity of a checkpoint over token shards, one full pass in
// file order without dropout (deterministic).
#include <iomanip>
#include <ostream>

#include "train/command_options.h"
#include "train/device_choice.h"
#include "train/evaluate.h"
#include "train/inference_model.h"

namespace ft {

int run_eval(const EvalOptions& options, std::ostream& out, std::ostream&) {
  InferenceModel m = load_inference_model(options.checkpoint);
  const int64_t T = options.seq_len > 0 ? options.seq_len : m.config.max_seq_len;
  if (T > m.config.max_seq_len)
    throw Error(str("eval: --seq-len ", T, " exceeds the checkpoint's max_seq_len = ", m.config.max_seq_len));
  LoaderOptions lo;
  lo.inputs = options.data;
  lo.split = "val";
  lo.batch_size = options.batch_size;
  lo.seq_len = T;
  lo.shuffle = false;
  lo.vocab_size = static_cast<int32_t>(m.config.vocab_size);
  Loader loader(lo);
  const EvalResult r = evaluate(*m.model, loader, 0, m.device);
  out << "loss " << std::fixed << std::setprecision(4) << r.loss << " | perplexity " << std::setprecision(2) << r.ppl
      << " | " << r.batches << " batches of " << options.batch_size << " x " << T << " (" << r.tokens << " tokens)\n";
  return 0;
}

}  // namespace ft
