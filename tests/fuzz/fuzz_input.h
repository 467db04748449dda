// fuzz_input.h — what every harness shares: the fuzzer's bytes written to a file of this process
// (the loaders take paths, so the bytes go through the real file-reading code), and the one kind
// of failure that is an answer rather than a finding: ampgrad::Error, a named refusal.
// Anything else that escapes (another exception, a signal, a sanitizer report) is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tensor/error.h"

namespace ampgrad::fuzz {

// $TMPDIR/ampgrad-fuzz-<pid>-<name>: one per process, so parallel fuzzing jobs never share one.
inline std::string scratch_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ampgrad-fuzz-" + std::to_string(getpid()) + "-" + name)).string();
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  if (!out.flush()) std::abort();  // the harness cannot do its job: no disk space?
}

// Runs `load`; a named refusal ends the input quietly, anything else propagates to libFuzzer.
template <class F> bool refused(F load) {
  try {
    load();
    return false;
  } catch (const ampgrad::Error&) {
    return true;
  }
}

}  // namespace ampgrad::fuzz
