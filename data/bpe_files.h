// Where the GPT-2 vocabulary files (encoder.json, vocab.bpe) are looked for.
//
// Order: an explicit directory, else $FLASHTRAIN_BPE_DIR, else
// ${FLASHTRAIN_CACHE:-$HOME/.cache/flashtrain}/gpt2 -- the directory scripts/fetch_gpt2_bpe.sh
// fills by default. The files are never committed.
#pragma once

#include <string>

namespace ft {

struct BpeFiles {
  std::string encoder_json;  // <dir>/encoder.json
  std::string vocab_bpe;     // <dir>/vocab.bpe
};

// The cache directory scripts/fetch_gpt2_bpe.sh writes to by default.
std::string default_bpe_cache_dir();

// Resolves the directory as described above and checks both files are readable. Throws DataError,
// one line naming the missing file and the script that fetches it.
BpeFiles find_bpe_files(const std::string& explicit_dir = "");

}  // namespace ft
