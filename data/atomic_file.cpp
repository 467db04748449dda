// atomic_file.cpp — temporary file, write loop, fsync, rename, directory fsync (POSIX).
#include "data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tensor/error.h"

namespace ampgrad::data {

static std::string errno_str() { return std::strerror(errno); }

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // pid + a process-wide counter make the name unique; O_EXCL refuses a stale leftover, and
  // then the next number is tried. Mode 0666 lets the umask decide, as for any new file.
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_path_ = path_ + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  AMPGRAD_CHECK(fd_ >= 0, path_ << ": cannot create the temporary file " << temp_path_ << ": " << errno_str());
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;  // committed, or never opened
  ::close(fd_);
  ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* bytes, size_t n) {
  AMPGRAD_CHECK(fd_ >= 0, path_ << ": write after commit");
  const char* p = static_cast<const char*>(bytes);
  while (n > 0) {  // write() may write less than asked (signals, pipes, quotas)
    ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    AMPGRAD_CHECK(w > 0, path_ << ": writing " << temp_path_ << " failed: " << errno_str());
    p += w;
    n -= size_t(w);
  }
}

void AtomicFile::commit() {
  AMPGRAD_CHECK(fd_ >= 0, path_ << ": commit called twice");
  // The data must be on disk before the rename is, or a crash could leave the new name
  // pointing at an empty file.
  AMPGRAD_CHECK(::fsync(fd_) == 0, path_ << ": fsync of " << temp_path_ << " failed: " << errno_str());
  int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0 || ::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    std::string why = errno_str();
    ::unlink(temp_path_.c_str());
    throw Error(path_ + ": cannot replace it with " + temp_path_ + ": " + why);
  }
  // The rename lives in the directory; syncing it makes the new name itself durable.
  std::string dir = std::filesystem::path(path_).parent_path().string();
  int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

}  // namespace ampgrad::data
