// Config-time checks of the data keys: the shards named by train_data / val_data exist, have
// valid headers, hold token ids below vocab_size, and hold at least one batch -- so bad data
// stops the run before step 0 rather than hours into it.
#include <exception>

#include "core/error.h"
#include "data/error.h"
#include "data/loader.h"
#include "data/shard.h"
#include "train/config/config.h"

namespace ft {

std::vector<std::string> resolve_data_paths(const std::vector<std::string>& entries, const std::string& split,
                                            const std::string& key) {
  if (entries.empty()) throw Error(str(key, ": no shard file, directory or glob given"));
  try {
    // The loader's own expansion, so the check sees exactly the files training will read.
    return expand_shard_inputs(entries, split);
  } catch (const DataError& e) {
    throw Error(str(key, ": ", e.what(), " (token shards are written by `flashtrain prepare`)"));
  }
}

namespace {

void check_split(const TrainConfig& cfg, const std::vector<std::string>& entries, const std::string& split,
                 const std::string& key, bool check_token_ids) {
  const uint64_t T = static_cast<uint64_t>(cfg.max_seq_len);
  uint64_t windows = 0;
  for (const auto& path : resolve_data_paths(entries, split, key)) {
    try {
      const ShardReader shard(path);  // maps the file, checks magic, version and size
      const uint64_t n = shard.size();
      windows += n >= T + 1 ? (n - 1) / T : 0;  // the loader's window count (data/loader.h)
      // One sequential pass over the mapped file; vocab_size above 65536 cannot be exceeded.
      if (check_token_ids && cfg.vocab_size < 65536) shard.check_tokens(static_cast<int32_t>(cfg.vocab_size));
    } catch (const DataError& e) {
      throw Error(str(key, ": ", e.what()));
    }
  }
  if (windows < static_cast<uint64_t>(cfg.batch_size))
    throw Error(str(key, ": the shards hold ", windows, " windows of max_seq_len+1 = ", T + 1,
                    " tokens, fewer than one batch (batch_size = ", cfg.batch_size, ")"));
}

}  // namespace

void validate_data_paths(const TrainConfig& cfg, bool check_token_ids) {
  check_split(cfg, cfg.train_data, "train", "train_data", check_token_ids);
  if (!cfg.val_data.empty()) check_split(cfg, cfg.val_data, "val", "val_data", check_token_ids);
}

}  // namespace ft
