#include "data/shard.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "data/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards are little-endian; add byte swaps for this host");

namespace ft {
namespace {

constexpr size_t kWriteBufferTokens = 1 << 20;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

ShardWriter::ShardWriter(std::string path, bool rename_on_finish)
    : path_(std::move(path)), rename_on_finish_(rename_on_finish) {
  temp_path_ = path_ + ".tmp." + std::to_string(::getpid());
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (!file_) throw DataError(temp_path_ + ": cannot create shard: " + errno_text());
  const int32_t header[kShardHeaderInts] = {};  // real header written by finish()
  if (std::fwrite(header, sizeof(header), 1, file_) != 1) {
    const std::string why = errno_text();
    abandon();
    throw DataError(temp_path_ + ": write failed: " + why);
  }
  buffer_.reserve(kWriteBufferTokens);
}

ShardWriter::~ShardWriter() {
  if (!finished_) abandon();
}

void ShardWriter::append(const int32_t* ids, size_t n) {
  if (finished_) throw DataError(path_ + ": append after finish");
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] > 0xFFFF) {
      throw DataError(path_ + ": token id " + std::to_string(ids[i]) + " does not fit the uint16 shard format");
    }
    buffer_.push_back(static_cast<uint16_t>(ids[i]));
    if (buffer_.size() == kWriteBufferTokens) flush_buffer();
  }
  tokens_ += n;
}

void ShardWriter::flush_buffer() {
  if (!buffer_.empty() && std::fwrite(buffer_.data(), sizeof(uint16_t), buffer_.size(), file_) != buffer_.size()) {
    throw DataError(temp_path_ + ": write failed: " + errno_text());
  }
  buffer_.clear();
}

uint64_t ShardWriter::finish() {
  if (finished_) throw DataError(path_ + ": finish called twice");
  if (tokens_ > 0x7FFFFFFFull) throw DataError(path_ + ": more tokens than the int32 header can count");
  flush_buffer();
  int32_t header[kShardHeaderInts] = {};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens_);
  if (std::fseek(file_, 0, SEEK_SET) != 0 || std::fwrite(header, sizeof(header), 1, file_) != 1 ||
      std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0) {
    throw DataError(temp_path_ + ": write failed: " + errno_text());
  }
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) throw DataError(temp_path_ + ": close failed: " + errno_text());
  if (rename_on_finish_ && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    throw DataError(path_ + ": cannot rename " + temp_path_ + " into place: " + errno_text());
  }
  finished_ = true;
  return tokens_;
}

void ShardWriter::abandon() {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  std::remove(temp_path_.c_str());
  finished_ = true;
}

void write_shard(const std::string& path, const std::vector<int32_t>& ids) {
  ShardWriter w(path);
  w.append(ids);
  w.finish();
}

ShardReader::ShardReader(const std::string& path) : file_(path) {
  const size_t bytes = file_.size();
  if (bytes == 0) throw DataError(path + ": shard is empty (0 bytes)");
  if (bytes < kShardHeaderBytes) {
    throw DataError(path + ": shard is truncated: " + std::to_string(bytes) + " bytes, shorter than the " +
                    std::to_string(kShardHeaderBytes) + "-byte header");
  }
  int32_t header[3];
  std::memcpy(header, file_.data(), sizeof(header));
  if (header[0] != kShardMagic) {
    throw DataError(path + ": wrong magic number " + std::to_string(header[0]) + " (expected " +
                    std::to_string(kShardMagic) + "); not a token shard");
  }
  if (header[1] != kShardVersion) {
    throw DataError(path + ": unsupported shard version " + std::to_string(header[1]) + " (expected " +
                    std::to_string(kShardVersion) + ", uint16 tokens)");
  }
  if (header[2] < 0) throw DataError(path + ": negative token count " + std::to_string(header[2]) + " in header");
  tokens_ = static_cast<uint64_t>(header[2]);
  const uint64_t expected = kShardHeaderBytes + 2 * tokens_;
  if (bytes != expected) {
    throw DataError(path + ": header declares " + std::to_string(tokens_) + " tokens (" + std::to_string(expected) +
                    " bytes) but the file has " + std::to_string(bytes) + " bytes" +
                    (bytes < expected ? " (truncated)" : " (trailing data)"));
  }
}

void ShardReader::check_tokens(int32_t vocab_size) const {
  const uint16_t* t = tokens();
  for (uint64_t i = 0; i < tokens_; ++i) {
    if (t[i] >= vocab_size) {
      throw DataError(path() + ": token id " + std::to_string(t[i]) + " at index " + std::to_string(i) +
                      " is out of range for vocab_size " + std::to_string(vocab_size));
    }
  }
}

}  // namespace ft
