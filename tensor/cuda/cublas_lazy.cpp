// cublas_lazy.cpp — cuBLAS loaded on its first call, not at program start: the static
// constructors of libcublas and libcublasLt take 0.4 s in every process that links them, a GPU
// used or not (a CUDA build's ctest starts ~470 processes). The library does not link cuBLAS;
// it defines the five entry points the backend calls, and each finds its namesake in libcublas
// once (dlopen, dlsym) and forwards to it.
#include <cublas_v2.h>
#include <dlfcn.h>

#include "tensor/error.h"

namespace {

void* cublas_symbol(const char* name) {
  // The soname through the usual search (the program's RUNPATH holds the toolkit's lib/, as
  // cudart is linked from there), then the file CMake found at configure time.
  static void* library = [] {
    void* handle = dlopen(AMPGRAD_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!handle) handle = dlopen(AMPGRAD_CUBLAS_FILE, RTLD_NOW | RTLD_LOCAL);
    AMPGRAD_CHECK(handle, "cuBLAS: cannot load " AMPGRAD_CUBLAS_SONAME " nor " AMPGRAD_CUBLAS_FILE ": " << dlerror());
    return handle;
  }();
  void* function = dlsym(library, name);
  AMPGRAD_CHECK(function, "cuBLAS: " AMPGRAD_CUBLAS_SONAME " has no " << name);
  return function;
}

// Calls the loaded function with exactly the wrapper's parameter types.
template <class R = cublasStatus_t, class... Args>
R call(void* function, Args... args) {
  return reinterpret_cast<R (*)(Args...)>(function)(args...);
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static void* f = cublas_symbol("cublasCreate_v2");
  return call(f, handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static void* f = cublas_symbol("cublasSetStream_v2");
  return call(f, handle, stream);
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static void* f = cublas_symbol("cublasSetMathMode");
  return call(f, handle, mode);
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static void* f = cublas_symbol("cublasGetStatusString");
  return call<const char*>(f, status);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                          int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                          long long strideA, const void* B, cudaDataType Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc, long long strideC,
                                          int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  static void* f = cublas_symbol("cublasGemmStridedBatchedEx");
  return call(f, handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc,
              strideC, batchCount, computeType, algo);
}

}  // extern "C"
