// gemm.h — the cuBLAS call behind cuda::gemm, planned on the host: which operand goes first,
// which is read transposed, the leading dimensions and batch strides. matmul.cpp makes the call;
// tests/test_cuda_host.cpp replays these arguments through cuBLAS's documented column-major
// semantics on the CPU and compares with the CPU's matmul, so the layout logic is tested
// without a GPU.
#pragma once
#include <cublas_v2.h>

#include "tensor/tensor.h"

namespace ampgrad::cuda {

// The layout arguments of cublasGemmStridedBatchedEx, in its order: C = op(A) · op(B), column-
// major, m x n x k, `batch` times, C_p = C + p * strideC and likewise for A and B.
struct GemmArgs {
  cublasOperation_t transa, transb;
  int m, n, k;
  const void* A;
  int lda;
  int64_t strideA;
  const void* B;
  int ldb;
  int64_t strideB;
  void* C;
  int ldc;
  int64_t strideC;
  int batch;
};

// The arguments that make cuBLAS write out = a · b (row-major (M, N) or (B, M, N), contiguous),
// for a and b of matching 2-D or 3-D shapes (kernels::gemm checked them) with K > 0. An operand
// cuBLAS cannot read in place (no unit stride in its last two dims, or a broadcast row) is first
// copied into a_copy or b_copy, which must outlive the call.
GemmArgs gemm_args(const Tensor& a, const Tensor& b, const Tensor& out, Tensor& a_copy, Tensor& b_copy);

}  // namespace ampgrad::cuda
