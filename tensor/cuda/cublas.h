// cublas.h — cuBLAS for the CUDA backend: one handle per device and the check for cuBLAS's
// status codes, which are not cudaError_t. Only the GEMM (matmul.cpp) calls cuBLAS; nothing
// here knows tensors.
//
//   AMPGRAD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas_handle(device), ...));
#pragma once
#include <cublas_v2.h>

namespace ampgrad::cuda {

// Raises ampgrad::Error naming the call, file and line and cuBLAS's message.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);
#define AMPGRAD_CUBLAS_CHECK(call) ::ampgrad::cuda::check_cublas((call), #call, __FILE__, __LINE__)

// The handle of `device`, created on first use and kept for the process, bound to stream() and
// refusing reduced-precision (half) reductions inside a GEMM: every half GEMM accumulates in
// float32 and rounds once, as on the CPU.
cublasHandle_t cublas_handle(int device);

}  // namespace ampgrad::cuda
