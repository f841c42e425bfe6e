// Read-only memory map of a whole file (RAII). An empty file maps to data() == nullptr, size 0.
#pragma once

#include <cstddef>
#include <string>

namespace ft {

class MappedFile {
 public:
  // Throws DataError "<path>: cannot open: <reason>" when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();

  std::string path_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole file into a string; throws DataError naming the file on failure.
std::string read_file(const std::string& path);

}  // namespace ft
