#include "data/bpe_files.h"

#include <cstdlib>
#include <fstream>

#include "data/error.h"

namespace ft {

std::string default_bpe_cache_dir() {
  if (const char* cache = std::getenv("FLASHTRAIN_CACHE"); cache && *cache) return std::string(cache) + "/gpt2";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/flashtrain/gpt2";
}

BpeFiles find_bpe_files(const std::string& explicit_dir) {
  std::string dir = explicit_dir;
  std::string source = "given directory";
  if (dir.empty()) {
    if (const char* env = std::getenv("FLASHTRAIN_BPE_DIR"); env && *env) {
      dir = env;
      source = "$FLASHTRAIN_BPE_DIR";
    } else {
      dir = default_bpe_cache_dir();
      source = "default cache";
    }
  }
  BpeFiles files{dir + "/encoder.json", dir + "/vocab.bpe"};
  for (const std::string* path : {&files.encoder_json, &files.vocab_bpe}) {
    if (!std::ifstream(*path, std::ios::binary).good()) {
      throw DataError(*path + ": GPT-2 vocabulary file not found or unreadable (" + source +
                      "); fetch it with scripts/fetch_gpt2_bpe.sh " + dir);
    }
  }
  return files;
}

}  // namespace ft
