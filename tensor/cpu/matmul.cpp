// matmul.cpp — CPU GEMM on Eigen. float32/float64 go straight to Eigen's GEMM (parallel via
// OpenMP). float16/bfloat16 emulate a tensor core: inputs are widened to float32 (exact),
// multiplied with float32 accumulation, and the result is rounded to half once. Eigen's own
// Eigen::half GEMM is ~200x slower, so it is never used. A float32 out_dtype keeps that float32
// result unrounded. A bfloat16 GEMM goes to oneDNN first where the build has it
// (onednn/bf16_gemm.h): the same contract, kept by the CPU's own bfloat16 dot-product
// instructions, with no float32 copies.
#include "tensor/cpu/gemm_operand.h"
#include "tensor/cpu/loops.h"
#include "tensor/kernels.h"
#ifdef AMPGRAD_WITH_ONEDNN
#include "tensor/cpu/onednn/bf16_gemm.h"
#endif

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

namespace {
template <class T, int Order> using MatMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, 0, Eigen::OuterStride<>>;

template <class T, class Out>
void gemm(const Operand& a, const Operand& b, Out&& c) {
  auto run = [&](const auto& A) {
    if (b.row_major) c.noalias() = A * MatMap<T, Eigen::RowMajor>((const T*)b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
    else c.noalias() = A * MatMap<T, Eigen::ColMajor>((const T*)b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
  };
  if (a.row_major) run(MatMap<T, Eigen::RowMajor>((const T*)a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld)));
  else run(MatMap<T, Eigen::ColMajor>((const T*)a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld)));
}

// The last two dims swapped, as a view (a transpose without autograd).
Tensor swap_last(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  std::swap(shape[t.dim() - 1], shape[t.dim() - 2]);
  std::swap(strides[t.dim() - 1], strides[t.dim() - 2]);
  return t.as_strided(shape, strides, t.storage_offset());
}

// A float32 copy of a half operand. A transposed operand (a column-major view such as Wᵀ) is
// converted in its own memory order and returned transposed again, so the conversion runs
// over contiguous memory (vectorised) and Eigen still reads the result in place.
Tensor widened(const Tensor& t) {
  if (!t.is_contiguous() && swap_last(t).is_contiguous()) return swap_last(contiguous_copy(swap_last(t), kFloat32));
  return contiguous_copy(t, kFloat32);
}
}  // namespace

Tensor bmm(const Tensor& a_in, const Tensor& b_in, DType out_dtype) {
  // shapes and dtypes were checked by kernels::bmm
  const bool batched = a_in.dim() == 3;
  const int64_t B = batched ? a_in.shape()[0] : 1, M = a_in.shape()[batched], K = a_in.shape()[batched + 1], N = b_in.shape()[batched + 1];
  Shape out_shape = batched ? Shape{B, M, N} : Shape{M, N};
  Tensor out = empty(out_shape, out_dtype);
  if (out.numel() == 0) return out;
  if (K == 0) { fill_(out, 0); return out; }
#ifdef AMPGRAD_WITH_ONEDNN
  if (a_in.dtype() == kBFloat16 && onednn::bf16_gemm(a_in, b_in, out)) return out;
#endif
  // Half: widen to float32 once (this is also the copy a strided operand would need).
  const bool widen = is_half(a_in.dtype());
  Tensor a = a_in, b = b_in, out32 = is_half(out_dtype) ? empty(out_shape, kFloat32) : out;
  if (widen) {
    a = widened(a_in);
    b = widened(b_in);
  }
  dispatch_floating("matmul", out32.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, half> && !std::is_same_v<T, bfloat16>) {
      for (int64_t i = 0; i < B; ++i) {
        auto oa = as_operand(a, i);
        auto ob = as_operand(b, i);
        if (!oa) { a = contiguous_copy(a); oa = as_operand(a, i); }
        if (!ob) { b = contiguous_copy(b); ob = as_operand(b, i); }
        Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> c(out32.data_ptr<T>() + i * M * N, M, N);
        gemm<T>(*oa, *ob, c);
      }
    }
  });
  if (is_half(out_dtype)) copy_(out, out32);  // the single rounding of the float32 accumulator
  return out;
}

}  // namespace ampgrad::cpu
