// atomic_file.cpp — temporary file, write loop, fsync, rename, directory fsync (POSIX).
#include "data/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "tensor/error.h"

namespace ampgrad::data {

static std::string errno_str() { return std::strerror(errno); }

// Removes what saves of `path` killed mid-write left behind: <name>.tmp.<pid>.<n> whose process
// no longer exists. A live process's file may be a save in progress and stays; so does one whose
// pid was reused since, until that process ends too. Best effort: an unreadable directory is
// the save's problem, reported when it creates its own temporary.
static void remove_stale_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string prefix = target.filename().string() + ".tmp.";
  auto is_number = [](std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = std::string_view(name).substr(prefix.size());  // "<pid>.<n>"
    const size_t dot = rest.find('.');
    if (dot == std::string_view::npos || !is_number(rest.substr(0, dot)) || !is_number(rest.substr(dot + 1))) continue;
    pid_t pid = 0;
    if (std::from_chars(rest.data(), rest.data() + dot, pid).ec != std::errc() || pid <= 0 || pid == getpid()) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(it->path().c_str());
  }
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  remove_stale_temporaries(path_);
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
