// Small file helpers shared by the writers in train/: every file flashtrain writes goes to a
// temporary name and is renamed into place, so a crash mid-write never leaves a damaged file
// under the final name (and never damages the previous one).
#pragma once

#include <cstddef>
#include <string>

namespace ft {

// Writes <path>.tmp.<pid>; commit() flushes it to disk (fsync) and renames it to <path>.
// Destroying an uncommitted AtomicFile deletes the temporary file. Errors name the file.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();

  const std::string& path() const { return path_; }

 private:
  std::string path_, temp_path_;
  int fd_ = -1;
};

// The whole of `contents` through an AtomicFile.
void write_file_atomic(const std::string& path, const std::string& contents);
// The whole file; throws "<path>: cannot open: <reason>".
std::string read_file_contents(const std::string& path);
// fsync on a directory, so a rename inside it survives a power cut. Best effort on filesystems
// that do not support it.
void fsync_directory(const std::string& dir);
// strerror(errno) as a string.
std::string errno_message();

}  // namespace ft
