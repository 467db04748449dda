// matmul.cpp — CPU GEMM on Eigen. The output's rows are cut into tiles, each computed by
// Eigen's sequential GEMM on one thread (parallel.h shares them out): no thread waits for
// another mid-GEMM, each packs only its own rows of a and writes its own run of C's rows, and
// since every row is computed with the arithmetic the whole GEMM gives it, the bits do not
// depend on the thread count. float16/bfloat16 emulate a tensor core: inputs widened to float32
// (exact; a cache block at a time as Eigen packs it, widening_gemm.h), float32 accumulation, the
// result rounded to half once, tile by tile in the thread's own scratch, a bias added to its
// rows first (the epilogue: one rounding for the whole linear).
// Eigen's own Eigen::half GEMM is ~200x slower, so it is never used. A float32 out_dtype keeps the
// float32 result unrounded. A bfloat16 GEMM goes to oneDNN first where the build has it and it is
// the faster path on this CPU (onednn/bf16_gemm.h): the same contract, kept by the CPU's bfloat16
// dot-product instructions.
#define EIGEN_DONT_PARALLELIZE  // the tiles below are the parallelism; these are the only Eigen GEMMs
#include "tensor/cpu/gemm_operand.h"
#include "tensor/cpu/gemm_path.h"
#include "tensor/cpu/half_convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/cpu/widening_gemm.h"
#include "tensor/kernels.h"
#ifdef AMPGRAD_WITH_ONEDNN
#include "tensor/cpu/onednn/bf16_gemm.h"
#endif

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

namespace {
template <class T, int Order> using MatMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, 0, Eigen::OuterStride<>>;
template <class T> using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

// Eigen computes a row-major C as Cᵀ = Bᵀ·Aᵀ: C's rows are the right-hand panels of its kernel,
// 4 at a time, the last M mod 4 rows one by one, each summed in another order. Tiles that start
// at multiples of 4 rows meet the same panels, with the odd rows last, as the whole GEMM does;
// a tile of at least 4 rows, and K + N ≥ 20, keep Eigen off its GEMV and coefficient-wise paths.
constexpr int64_t kTileAlign = 4;
// The multiply-adds worth a thread of their own (about 10 microseconds): a GEMM takes one thread
// per this many, up to all of them.
constexpr int64_t kGemmGrain = int64_t(1) << 18;

// c = a · b; 16-bit operands that gemm_ready kept read in place, widened block by block into scratch.
template <class T>
void eigen_gemm(const Operand& a, const Operand& b, OutMap<T> c, DType in, float* scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (in == kFloat16) return widening_gemm<half>(a, b, c.data(), c.outerStride(), scratch);
    if (in == kBFloat16) return widening_gemm<bfloat16>(a, b, c.data(), c.outerStride(), scratch);
  }
  auto run = [&](const auto& A) {
    if (b.row_major) c.noalias() = A * MatMap<T, Eigen::RowMajor>((const T*)b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
    else c.noalias() = A * MatMap<T, Eigen::ColMajor>((const T*)b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
  };
  if (a.row_major) run(MatMap<T, Eigen::RowMajor>((const T*)a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld)));
  else run(MatMap<T, Eigen::ColMajor>((const T*)a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld)));
}

// Rows [i0, i0 + m) of x, in place.
Operand rows(const Operand& x, int64_t i0, int64_t m, size_t element_size) {
  Operand s = x;
  s.rows = m;
  s.data = (const char*)x.data + (x.row_major ? i0 * x.ld : i0) * int64_t(element_size);
  return s;
}

// The last two dims swapped, as a view (a transpose without autograd).
Tensor swap_last(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  std::swap(shape[t.dim() - 1], shape[t.dim() - 2]);
  std::swap(strides[t.dim() - 1], strides[t.dim() - 2]);
  return t.as_strided(shape, strides, t.storage_offset());
}

// An operand as a GEMM reads it: copied if a GEMM cannot read it in place; a 16-bit one widened to
// float32 first in its own memory order (so a column-major Wᵀ converts contiguous memory), unless
// the GEMM widens it block by block as it packs (widening_gemm.h).
Tensor gemm_ready(const Tensor& x, bool widen) {
  if (!is_half(x.dtype()) || !widen) return as_operand(x, 0) ? x : contiguous_copy(x);
  if (!x.is_contiguous() && swap_last(x).is_contiguous()) return swap_last(contiguous_copy(swap_last(x), kFloat32));
  return contiguous_copy(x, kFloat32);
}
}  // namespace

Tensor gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& bias, DType out_dtype) {
  // shapes and dtypes were checked by kernels::gemm
  const bool batched = a_in.dim() == 3;
  const int64_t B = batched ? a_in.shape()[0] : 1, M = a_in.shape()[batched], K = a_in.shape()[batched + 1], N = b_in.shape()[batched + 1];
  Tensor out = empty(batched ? Shape{B, M, N} : Shape{M, N}, out_dtype);
  if (out.numel() == 0) return out;
  if (K == 0) {  // a sum of nothing: the bias alone
    if (bias.defined()) copy_(out, bias);
    else fill_(out, 0);
    return out;
  }
#ifdef AMPGRAD_WITH_ONEDNN
  if (a_in.dtype() == kBFloat16 && onednn::bf16_gemm(a_in, b_in, bias, out)) return out;
#endif
  // Eigen cuts K into blocks sized from the L1 it detects, and the block boundaries are where the
  // float32 sums round: fixed sizes give every machine the same bits (48 KiB: the L1 of the Intel
  // Xeon where the walkthrough's figures were first measured; a Zen 4's 32 KiB gave other digits).
  static const bool fixed_cache_sizes = (Eigen::setCpuCacheSizes(48 << 10, 1 << 20, 32 << 20), true);
  (void)fixed_cache_sizes;
  const Tensor row = bias.defined() ? contiguous_copy(bias, is_half(bias.dtype()) ? kFloat32 : bias.dtype()) : Tensor();  // in the math type
  // Tiles: each matrix's rows in a piece per kGemmGrain multiply-adds, up to the threads a batch
  // leaves; the last tile takes the rows left over (at least 4).
  const int64_t threads = omp_get_max_threads();
  const int64_t pieces = K + N >= 20 ? std::clamp<int64_t>(M * N * K / kGemmGrain, 1, std::max<int64_t>(1, threads / B)) : 1;
  const int64_t h = ((M + pieces - 1) / pieces + kTileAlign - 1) / kTileAlign * kTileAlign, tiles = std::max<int64_t>(1, (M - 4) / h + 1);
  const int64_t first = tiles > 1 ? h : M, last = M - (tiles - 1) * h;  // rows of the first tiles and of the last (up to h + 3)
  const bool widen = !takes_blocked_gemm(std::min(first, last), K, N);  // the smallest tile decides
  const Tensor a = gemm_ready(a_in, widen), b = gemm_ready(b_in, widen);
  // per thread: C's tile in float32 if C is 16-bit, then the blocks of 16-bit operands widened
  const int64_t slot = is_half(out_dtype) ? (std::max(first, last) * N + 15) / 16 * 16 : 0,
                blocks = is_half(a.dtype()) ? std::max(widening_gemm_scratch(first, K, N), widening_gemm_scratch(last, K, N)) : 0;
  const Tensor scratch = empty({std::min(threads, B * tiles) * (slot + blocks)}, kFloat32);  // no more threads than tiles run
  dispatch_floating("matmul", out_dtype, [&](auto tag) {
    using S = typename decltype(tag)::type;  // out's storage
    using T = opmath_t<S>;                   // what the GEMM computes in
    parallel_for(B * tiles, h * K * N / (kGemmGrain / kGrain), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t i = t / tiles, i0 = t % tiles * h, m = t % tiles == tiles - 1 ? M - i0 : h;
        const Operand a_rows = rows(*as_operand(a, i), i0, m, a.element_size()), b_i = *as_operand(b, i);
        S* c = (S*)out.raw_data() + (i * M + i0) * N;
        // own: this thread's float32 scratch (the piece starting at 0 runs on the calling thread, maybe of another team)
        float* own = (float*)scratch.raw_data() + (begin == 0 ? 0 : omp_get_thread_num()) * (slot + blocks);
        const auto multiply = [&](auto tile) { eigen_gemm(a_rows, b_i, tile, a.dtype(), own + slot); };
        if constexpr (has_convert_contiguous<S, float>) {  // a 16-bit C, as a tensor core makes it
          // exercise 1.1: round_once_gemm — multiply in float32 into this thread's scratch, add the bias there, round C to S once
          OutMap<float> tile(own, m, N, Eigen::OuterStride<>(N));
          multiply(tile);
          if (row.defined()) tile.rowwise() += Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>>((const float*)row.raw_data(), N);
          convert_contiguous(c, own, m * N);
          // end exercise 1.1
        } else {  // float32 or float64: computed in place, nothing to round
          OutMap<T> tile(c, m, N, Eigen::OuterStride<>(N));
          multiply(tile);
          if (row.defined()) tile.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>((const T*)row.raw_data(), N);
        }
      }
    });
  });
  return out;
}

std::string gemm_path_note(DType dtype) {
  if (dtype == kFloat16)
    return "cpu: float16 GEMMs widened to float32 (no float16 GEMM kernel here), the 16-bit casts on top: float16 AMP is slower than "
           "float32 on this CPU; it shows float16's numerics, not its speed";
#ifdef AMPGRAD_WITH_ONEDNN
  const std::string kernel = " through oneDNN (" + onednn::bf16_gemm_kernel() + ")";
  switch (onednn::bf16_gemm_path()) {
    case Bf16Path::amx: return "cpu: bfloat16 GEMMs on AMX tiles" + kernel + ", several times float32's GEMM rate: bf16 AMP can train faster than float32 here";
    case Bf16Path::dot_product: return "cpu: bfloat16 GEMMs on AVX512-BF16 dot products" + kernel + ", faster than float32's FMA on this AMD CPU";
    case Bf16Path::widened: break;
  }
#endif
  if (__builtin_cpu_supports("avx512bf16"))
    return "cpu: bfloat16 GEMMs widened to float32: this CPU's AVX512-BF16 without AMX runs them no faster than float32's FMA, so bf16 "
           "AMP saves memory here, not time";
  return "cpu: no AVX512-BF16 (or no oneDNN in this build): bfloat16 GEMMs widened to float32, the 16-bit casts on top: bf16 AMP is "
         "slower than float32 on this CPU";
}

}  // namespace ampgrad::cpu
