// test_util.h — small helpers several suites share: a temporary directory, whole-file bytes,
// a command's exit status and output, the message of the Error a call throws, and which kernel
// a CPU bfloat16 GEMM runs.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tensor/error.h"
#ifdef AMPGRAD_WITH_ONEDNN
#include "tensor/cpu/onednn/bf16_gemm.h"
#endif

// The oneDNN kernel a CPU bfloat16 GEMM runs, or "" where it widens to float32 on Eigen
// (tensor/cpu/matmul.cpp): a build without oneDNN, or a CPU without bfloat16 dot products.
inline std::string onednn_bf16_kernel() {
#ifdef AMPGRAD_WITH_ONEDNN
  return ampgrad::cpu::onednn::bf16_gemm_kernel();
#else
  return "";
#endif
}

// A fresh directory for a test, removed with its contents when the test ends.

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

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Runs a shell command: its exit status (-1 if a signal ended it) and what it wrote to stdout
// and stderr together.
struct CommandResult {
  int status;
  std::string output;
};
inline CommandResult run_command(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// The message of the ampgrad::Error that f throws ("" if it throws none).
template <class F> std::string error_of(F f) {
  try {
    f();
  } catch (const ampgrad::Error& e) {
    return e.what();
  }
  return "";
}
