// matmul.cpp — CPU GEMM on Eigen. The output's columns are cut into tiles, each computed by
// Eigen's sequential GEMM on one thread (parallel.h shares them out): no thread waits for
// another mid-GEMM, and since every tile does the arithmetic one whole GEMM does, the bits do
// not depend on the thread count. float16/bfloat16 emulate a tensor core: inputs widened to
// float32 (exact), float32 accumulation, the result rounded to half once; b is widened and the
// result rounded tile by tile, in the thread's own scratch, so neither is ever copied whole.
// Eigen's own Eigen::half GEMM is ~200x slower, so it is never used. A float32 out_dtype keeps
// the float32 result unrounded. A bfloat16 GEMM goes to oneDNN first where the build has it
// (onednn/bf16_gemm.h): the same contract, kept by the CPU's bfloat16 dot-product instructions.
#define EIGEN_DONT_PARALLELIZE  // the tiles below are the parallelism; this is the only Eigen GEMM
#include "tensor/cpu/gemm_operand.h"
#include "tensor/cpu/half_convert.h"
#include "tensor/cpu/loops.h"
#include "tensor/kernels.h"
#ifdef AMPGRAD_WITH_ONEDNN
#include "tensor/cpu/onednn/bf16_gemm.h"
#endif

namespace ampgrad::cpu {
using namespace ampgrad::kernels;

namespace {
template <class T, int Order> using MatMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, 0, Eigen::OuterStride<>>;
template <class T> using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

// Eigen computes a row-major C as Cᵀ = Bᵀ·Aᵀ, in blocks of 24 of C's columns (its float
// kernel's rows; 12 for double): tiles cut at multiples of 24 meet the same blocks, in the
// same order, with the partial block last, as the whole GEMM does.
constexpr int64_t kTileAlign = 24;
// Below this many multiply-adds a GEMM stays on one thread (a few microseconds of work).
constexpr int64_t kGemmGrain = int64_t(1) << 20;

template <class T>
void gemm(const Operand& a, const Operand& b, OutMap<T> c) {
  auto run = [&](const auto& A) {
    if (b.row_major) c.noalias() = A * MatMap<T, Eigen::RowMajor>((const T*)b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
    else c.noalias() = A * MatMap<T, Eigen::ColMajor>((const T*)b.data, b.rows, b.cols, Eigen::OuterStride<>(b.ld));
  };
  if (a.row_major) run(MatMap<T, Eigen::RowMajor>((const T*)a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld)));
  else run(MatMap<T, Eigen::ColMajor>((const T*)a.data, a.rows, a.cols, Eigen::OuterStride<>(a.ld)));
}

// Columns [j0, j0 + n) of x, in place.
Operand columns(const Operand& x, int64_t j0, int64_t n, size_t element_size) {
  Operand s = x;
  s.cols = n;
  s.data = (const char*)x.data + (x.row_major ? j0 : j0 * x.ld) * int64_t(element_size);
  return s;
}

// x as float32 in dst, run by run in its own memory order (so a column-major Wᵀ converts
// contiguous memory, vectorised); x itself if it is float32 or float64 already.
template <class S> Operand widened(const Operand& x, float* dst) {
  if constexpr (!has_convert_contiguous<float, S>) return x;
  else {
    const int64_t runs = x.row_major ? x.rows : x.cols, len = x.row_major ? x.cols : x.rows;
    for (int64_t r = 0; r < runs; ++r) convert_contiguous(dst + r * len, (const S*)x.data + r * x.ld, len);
    return Operand{dst, x.rows, x.cols, std::max<int64_t>(len, 1), x.row_major};
  }
}

// The last two dims swapped, as a view (a transpose without autograd).
Tensor swap_last(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  std::swap(shape[t.dim() - 1], shape[t.dim() - 2]);
  std::swap(strides[t.dim() - 1], strides[t.dim() - 2]);
  return t.as_strided(shape, strides, t.storage_offset());
}

// a, which every tile of its matrix reads whole: widened to float32 once if it is 16-bit (in its
// own memory order, as above), copied if a GEMM cannot read it in place.
Tensor whole_a(const Tensor& a) {
  if (!is_half(a.dtype())) return as_operand(a, 0) ? a : contiguous_copy(a);
  if (!a.is_contiguous() && swap_last(a).is_contiguous()) return swap_last(contiguous_copy(swap_last(a), kFloat32));
  return contiguous_copy(a, kFloat32);
}
}  // namespace

Tensor bmm(const Tensor& a_in, const Tensor& b_in, DType out_dtype) {
  // shapes and dtypes were checked by kernels::bmm
  const bool batched = a_in.dim() == 3;
  const int64_t B = batched ? a_in.shape()[0] : 1, M = a_in.shape()[batched], K = a_in.shape()[batched + 1], N = b_in.shape()[batched + 1];
  Tensor out = empty(batched ? Shape{B, M, N} : Shape{M, N}, out_dtype);
  if (out.numel() == 0) return out;
  if (K == 0) { fill_(out, 0); return out; }
#ifdef AMPGRAD_WITH_ONEDNN
  if (a_in.dtype() == kBFloat16 && onednn::bf16_gemm(a_in, b_in, out)) return out;
#endif
  const Tensor a = whole_a(a_in), b = as_operand(b_in, 0) ? b_in : contiguous_copy(b_in);
  // Tiles: each matrix's columns in as many pieces as the threads a batch leaves, when the GEMM
  // is big enough and K + M ≥ 20 (else Eigen multiplies a small tile coefficient by coefficient,
  // which rounds differently).
  const int64_t threads = omp_get_max_threads();
  const int64_t pieces = M * N * K >= kGemmGrain && K + M >= 20 ? std::max<int64_t>(1, threads / B) : 1;
  const int64_t w = std::min(N, ((N + pieces - 1) / pieces + kTileAlign - 1) / kTileAlign * kTileAlign), tiles = (N + w - 1) / w;
  const bool widen_b = is_half(b.dtype()), round_out = is_half(out_dtype);
  // per thread: b's tile in float32 (K, w), then C's tile in float32 (M, w)
  const int64_t scratch_size = (widen_b ? K * w : 0) + (round_out ? M * w : 0);
  const Tensor scratch = empty({threads * scratch_size}, kFloat32);
  Eigen::initParallel();  // Eigen reads the cache sizes once, before threads share them
  dispatch_floating("matmul", b.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;  // b's and out's storage (out is float32 instead if asked)
    using T = opmath_t<S>;                   // what the GEMM computes in
    parallel_for(B * tiles, M * K * w / 32, [&](int64_t begin, int64_t end) {
      // the piece starting at 0 runs on the calling thread, which may be a thread of someone else's team
      float* own = scratch.data_ptr<float>() + (begin == 0 ? 0 : omp_get_thread_num()) * scratch_size;
      for (int64_t t = begin; t < end; ++t) {
        const int64_t i = t / tiles, j0 = t % tiles * w, n = std::min(w, N - j0);
        const Operand tile_b = widened<S>(columns(*as_operand(b, i), j0, n, sizeof(S)), own);
        T* c = round_out ? (T*)(own + (widen_b ? K * w : 0)) : (T*)out.raw_data() + i * M * N + j0;
        gemm<T>(*as_operand(a, i), tile_b, OutMap<T>(c, M, n, Eigen::OuterStride<>(round_out ? n : N)));
        if constexpr (has_convert_contiguous<S, float>)  // the single rounding of the float32 accumulator
          if (round_out)
            for (int64_t r = 0; r < M; ++r) convert_contiguous((S*)out.raw_data() + i * M * N + r * N + j0, (const float*)c + r * n, n);
      }
    });
  });
  return out;
}

}  // namespace ampgrad::cpu
