// temp_dir.h — a fresh directory for a test, removed with its contents when the test ends.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <string>

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int count = 0;
    path = std::filesystem::temp_directory_path() / ("ampgrad-test-" + std::to_string(getpid()) + "-" + std::to_string(count++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  int64_t entries() const {
    return std::distance(std::filesystem::directory_iterator(path), std::filesystem::directory_iterator());
  }
};
