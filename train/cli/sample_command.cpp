// `flashtrain sample`: text from a checkpoint, GPT-2 BPE in and out.
#include <ostream>

#include "data/bpe_tokenizer.h"
#include "train/cli/command_options.h"
#include "train/device_choice.h"
#include "train/inference_model.h"
#include "train/sample.h"

namespace ft {

int run_sample(const SampleOptions& options, std::ostream& out, std::ostream&) {
  const BpeTokenizer tok = BpeTokenizer::load();
  InferenceModel m = load_inference_model(options.checkpoint, options.fp8_attention);
  std::vector<int32_t> prompt = tok.encode(options.prompt, true);
  if (prompt.empty()) prompt.push_back(BpeTokenizer::kEndOfText);  // an empty prompt starts a document
  for (const int32_t id : prompt)
    if (id >= m.config.vocab_size)
      throw Error(str("sample: the prompt's token ", id, " is outside the checkpoint's vocab_size = ", m.config.vocab_size));
  SampleParams sp;
  sp.max_new_tokens = options.max_new_tokens;
  sp.temperature = options.temperature;
  sp.top_k = options.top_k;
  sp.seed = options.seed;
  sp.stop_token = m.config.vocab_size > BpeTokenizer::kEndOfText ? BpeTokenizer::kEndOfText : -1;
  const std::vector<int32_t> generated = sample_tokens(*m.model, prompt, sp);
  out << options.prompt << tok.decode(generated) << "\n";
  return 0;
}

}  // namespace ft
