// input_file.h — the first check of every reader in data/: the path names a regular file, not a
// directory, a device such as /dev/null, or nothing. Returns its size, or an Error naming it.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "tensor/error.h"

namespace ampgrad::data {

// What a path that is not a regular file is, for messages: "a directory", "a FIFO", ...
inline const char* special_file_kind(const std::filesystem::file_status& status) {
  return std::filesystem::is_directory(status) ? "a directory" : std::filesystem::is_fifo(status) ? "a FIFO" : "a device or other special file";
}

inline uint64_t input_file_size(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  AMPGRAD_CHECK(!ec && std::filesystem::exists(status), path << ": cannot open: " << (ec ? ec.message() : "No such file or directory"));
  AMPGRAD_CHECK(std::filesystem::is_regular_file(status), path << ": cannot read it as a file: it is " << special_file_kind(status));
  const uint64_t size = std::filesystem::file_size(path, ec);
  AMPGRAD_CHECK(!ec, path << ": cannot read its size: " << ec.message());
  return size;
}

}  // namespace ampgrad::data
