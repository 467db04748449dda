// matmul.cpp — cuda::gemm on cuBLAS, with the CPU's semantics (tensor/cpu/matmul.cpp): half
// inputs multiply on tensor cores with float32 accumulation and one rounding of the output (or
// none, for a float32 out_dtype); float32 uses TF32 tensor cores only when matmul_allow_tf32();
// float64 stays float64; transposed operands are read in place. No kernel of ours: cuBLAS does this best.
// Letters: B batch, M N K the matrix dims, as in tensor/kernels.h.
#include <algorithm>
#include <climits>

#include "tensor/backends.h"
#include "tensor/cuda/cublas.h"
#include "tensor/cuda/gemm.h"
#include "tensor/cuda/runtime.h"

namespace ampgrad::cuda {
namespace {

// cuBLAS is column-major. A row-major (R, C) matrix is, to cuBLAS, its column-major (C, R)
// transpose; so row-major C = A·B is computed as column-major Cᵀ = Bᵀ·Aᵀ: b goes first, a
// second, and the output comes out row-major with no transpose of anything.
//
// One operand, as cuBLAS reads it in that product. A slice with strides (ld, 1) (row-major)
// already is the transpose cuBLAS wants: CUBLAS_OP_N. One with strides (1, ld) (column-major,
// e.g. w.t()) is read with CUBLAS_OP_T. batch_stride steps between the slices of a 3-D operand.
struct Operand {
  const void* data;
  cublasOperation_t op;
  int64_t ld, batch_stride;
};

// The operand cuBLAS can read `t` as without a copy, if any. cuBLAS needs ld >= the length of
// a column-major column (C for OP_N, R for OP_T), so a broadcast (stride 0) row fails and is copied.
std::optional<Operand> as_operand(const Tensor& t) {
  const int64_t n = t.dim(), R = t.shape()[n - 2], C = t.shape()[n - 1];
  const int64_t sr = t.strides()[n - 2], sc = t.strides()[n - 1], batch_stride = n == 3 ? t.strides()[0] : 0;
  if (sc == 1 || C == 1) {  // a size-1 dim's stride is never read, so any value fits
    const int64_t ld = R == 1 ? std::max<int64_t>(C, 1) : sr;
    if (ld >= std::max<int64_t>(C, 1)) return Operand{t.raw_data(), CUBLAS_OP_N, ld, batch_stride};
  }
  if (sr == 1 || R == 1) {
    const int64_t ld = C == 1 ? std::max<int64_t>(R, 1) : sc;
    if (ld >= std::max<int64_t>(R, 1)) return Operand{t.raw_data(), CUBLAS_OP_T, ld, batch_stride};
  }
  return std::nullopt;
}

Operand readable(const Tensor& t, Tensor& copy_holder) {
  if (auto op = as_operand(t)) return *op;
  copy_holder = empty(t.shape(), TensorOptions(t.dtype()).device(t.device()));
  kernels::copy_(copy_holder, t);
  return *as_operand(copy_holder);
}

// Storage type and compute type per dtype. Half types: float32 compute ("accumulate in
// float32, round the output once"), which puts them on tensor cores.
struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};
GemmTypes gemm_types(DType t) {
  if (t == kFloat16) return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
  if (t == kBFloat16) return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
  if (t == kFloat64) return {CUDA_R_64F, CUBLAS_COMPUTE_64F};
  return {CUDA_R_32F, matmul_allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
}

int as_int(int64_t v, const char* what) {
  AMPGRAD_CHECK(v <= INT_MAX, "matmul: " << what << " " << v << " exceeds cuBLAS's 32-bit limit");
  return int(v);
}
}  // namespace

// Cᵀ (N, M) = op(b) (N, K) · op(a) (K, M), column-major, B times.
GemmArgs gemm_args(const Tensor& a_in, const Tensor& b_in, const Tensor& out, Tensor& a_copy, Tensor& b_copy) {
  const bool batched = a_in.dim() == 3;
  const int64_t B = batched ? a_in.shape()[0] : 1, M = a_in.shape()[batched], K = a_in.shape()[batched + 1], N = b_in.shape()[batched + 1];
  const Operand a = readable(a_in, a_copy), b = readable(b_in, b_copy);
  return {b.op, a.op, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"),
          b.data, as_int(b.ld, "leading dimension"), b.batch_stride,
          a.data, as_int(a.ld, "leading dimension"), a.batch_stride,
          out.raw_data(), as_int(N, "N"), M * N, as_int(B, "batch")};
}

Tensor gemm(const Tensor& a, const Tensor& b, const Tensor& bias, DType out_dtype) {
  // shapes and dtypes were checked by kernels::gemm
  const bool batched = a.dim() == 3;
  Tensor out = empty(batched ? Shape{a.shape()[0], a.shape()[1], b.shape()[2]} : Shape{a.shape()[0], b.shape()[1]},
                     TensorOptions(out_dtype).device(a.device()));  // (B, M, N)
  if (out.numel() == 0) return out;
  // A bias goes into C first and cuBLAS adds it (beta = 1) in the float32 compute type, before its
  // one rounding of the output: the bias epilogue of PyTorch's addmm. K = 0 leaves it alone.
  if (bias.defined()) copy_(out, bias);
  if (a.shape()[batched + 1] == 0) {  // K = 0: a sum of nothing
    if (!bias.defined()) fill_(out, 0);
    return out;
  }
  Tensor a_copy, b_copy;
  const GemmArgs g = gemm_args(a, b, out, a_copy, b_copy);
  const GemmTypes types = gemm_types(a.dtype());
  const cudaDataType_t out_type = gemm_types(out_dtype).data;  // the inputs' type, or float32 for half inputs
  // alpha and beta are read in the compute type: double for float64, float otherwise; beta 1 adds C's bias.
  const double one64 = 1, beta64 = bias.defined() ? 1 : 0;
  const float one32 = 1, beta32 = bias.defined() ? 1 : 0;
  const bool is64 = types.compute == CUBLAS_COMPUTE_64F;
  const void* alpha = is64 ? (const void*)&one64 : (const void*)&one32;
  const void* beta = is64 ? (const void*)&beta64 : (const void*)&beta32;

  const int device = a.device().index;
  DeviceGuard guard(device);
  AMPGRAD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(cublas_handle(device), g.transa, g.transb, g.m, g.n, g.k, alpha, g.A, types.data,
                                                  g.lda, g.strideA, g.B, types.data, g.ldb, g.strideB, beta, g.C, out_type, g.ldc,
                                                  g.strideC, g.batch, types.compute, CUBLAS_GEMM_DEFAULT));
  return out;
}

}  // namespace ampgrad::cuda
