// cublas.cpp — the per-device cuBLAS handles and cuBLAS's status check (cublas.h). Leaves out
// a workspace from our allocator: cuBLAS keeps its own per handle (a few MiB, not counted in
// memory_stats()).
#include "tensor/cuda/cublas.h"

#include <map>
#include <mutex>

#include "tensor/cuda/runtime.h"
#include "tensor/error.h"

namespace ampgrad::cuda {

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  AMPGRAD_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLAS error: " << call << " failed at " << file << ":" << line << ": "
                                                                  << cublasGetStatusString(status));
}

cublasHandle_t cublas_handle(int device) {
  static std::mutex mutex;
  // Leaked, like the allocator's cache: destroying handles at exit races the driver's teardown.
  static auto* handles = new std::map<int, cublasHandle_t>;
  std::lock_guard lock(mutex);
  if (auto it = handles->find(device); it != handles->end()) return it->second;
  DeviceGuard guard(device);  // a handle belongs to the device current at its creation
  cublasHandle_t handle = nullptr;
  AMPGRAD_CUBLAS_CHECK(cublasCreate(&handle));
  AMPGRAD_CUBLAS_CHECK(cublasSetStream(handle, stream()));
  AMPGRAD_CUBLAS_CHECK(cublasSetMathMode(handle, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  handles->emplace(device, handle);
  return handle;
}

}  // namespace ampgrad::cuda
