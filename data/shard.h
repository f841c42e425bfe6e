// Token shards in the llm.c / nanoGPT layout, so existing data works:
//
//   bytes [0, 1024)      256 x int32 little-endian header: [0] magic 20240520, [1] version 1,
//                        [2] token count N, [3..255] zero
//   bytes [1024, 1024+2N) N x uint16 little-endian token ids
//
// ShardWriter writes "<path>.tmp.<pid>" and renames it to <path> in finish(), so a crash or an error
// never leaves a half-written file under the final name; destroying an unfinished writer deletes
// its temporary file. ShardReader memory-maps a shard and checks it; each failure is a DataError
// whose one-line message names the file and the problem.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "data/mapped_file.h"

namespace ft {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr size_t kShardHeaderInts = 256;
constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);
constexpr int32_t kGpt2VocabSize = 50257;

class ShardWriter {
 public:
  // Opens <path>.tmp.<pid> for writing. When rename_on_finish is false, finish() leaves the data in
  // temp_path() for the caller to rename (used to publish several shards together).
  explicit ShardWriter(std::string path, bool rename_on_finish = true);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Ids must be in [0, 65536); they are stored as uint16.
  void append(const int32_t* ids, size_t n);
  void append(const std::vector<int32_t>& ids) { append(ids.data(), ids.size()); }
  // Writes the header, flushes, closes and (by default) renames to path(). Returns the token count.
  uint64_t finish();
  // Deletes the temporary file; the writer can no longer be used.
  void abandon();

  uint64_t tokens() const { return tokens_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void flush_buffer();

  std::string path_, temp_path_;
  bool rename_on_finish_;
  std::FILE* file_ = nullptr;
  std::vector<uint16_t> buffer_;
  uint64_t tokens_ = 0;
  bool finished_ = false;
};

// Writes a whole shard (temporary name, then rename).
void write_shard(const std::string& path, const std::vector<int32_t>& ids);

class ShardReader {
 public:
  // Maps and checks the header and size. Token values are checked by check_tokens(), which reads
  // the whole file; the loader instead checks each window as it copies it.
  explicit ShardReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  uint64_t size() const { return tokens_; }  // number of tokens
  const uint16_t* tokens() const { return reinterpret_cast<const uint16_t*>(file_.data() + kShardHeaderBytes); }
  uint16_t operator[](uint64_t i) const { return tokens()[i]; }

  // Throws "<path>: token id X at index I is out of range for vocab_size V".
  void check_tokens(int32_t vocab_size = kGpt2VocabSize) const;

 private:
  MappedFile file_;
  uint64_t tokens_ = 0;
};

}  // namespace ft
