#include "train/checkpoint/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ft {

std::string errno_message() { return std::strerror(errno); }

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  temp_path_ = str(path_, ".tmp.", ::getpid());
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(str(path_, ": cannot create ", temp_path_, ": ", errno_message()));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t bytes) {
  FT_CHECK_ARG(fd_ >= 0, path_, ": write after commit");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(str(path_, ": write to ", temp_path_, " failed: ", errno_message()));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  FT_CHECK_ARG(fd_ >= 0, path_, ": commit called twice");
  if (::fsync(fd_) != 0) throw Error(str(path_, ": fsync of ", temp_path_, " failed: ", errno_message()));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_path_.c_str());
    throw Error(str(path_, ": close of ", temp_path_, " failed: ", errno_message()));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const std::string why = errno_message();
    ::unlink(temp_path_.c_str());
    throw Error(str(path_, ": cannot rename ", temp_path_, " into place: ", why));
  }
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

std::string read_file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(str(path, ": cannot open: ", errno_message()));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(str(path, ": read failed"));
  return ss.str();
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace ft
