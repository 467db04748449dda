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

#include "tensor/cpu/allocator.h"
#include "tensor/error.h"

namespace ampgrad::fuzz {

// $TMPDIR/ampgrad-fuzz-<pid>-<name>: one per process, so parallel fuzzing jobs never share one.
inline std::string scratch_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ampgrad-fuzz-" + std::to_string(getpid()) + "-" + name)).string();
}

// Starts an input: the previous input's tensors are gone, and their blocks, which the CPU
// allocator keeps for reuse (up to 2 GB), go back to the system (sizes that never repeat would
// fill the cache past the fuzzer's RSS limit); then the bytes are written to path.
inline void new_input(const std::string& path, const uint8_t* data, size_t size) {
  cpu::empty_cache();
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
