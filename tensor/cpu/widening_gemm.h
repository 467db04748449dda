// widening_gemm.h — a float32 GEMM that reads float16/bfloat16 operands in place, widening each
// cache block just before Eigen packs it, instead of first writing a float32 copy of every
// operand and reading it back. The loop is Eigen 3.4's own sequential one
// (products/GeneralMatrixMatrix.h) with its blocking, packing and kernel; widening is exact and
// packing only reorders, so every product and sum is the one Eigen's GEMM on float32 copies
// computes: the same bits, without the copies' passes over memory.
#pragma once
#include <Eigen/Core>
#include <algorithm>
#include <type_traits>

#include "tensor/cpu/gemm_operand.h"
#include "tensor/cpu/half_convert.h"

namespace ampgrad::cpu {

// Whether Eigen's product of (m, K) and (K, n) takes its blocked GEMM, the loop below: not its
// coefficient-wise loop (m + n + K < 20), nor its matrix-vector product (one row or column).
inline bool takes_blocked_gemm(int64_t m, int64_t K, int64_t n) { return m + n + K >= 20 && m > 1 && n > 1; }

namespace widening {
// A matrix as Eigen's blocked GEMM sees it: element (i, j) at data[i + j * ld] (column-major) or
// data[i * ld + j] (row-major).
template <class S> struct Source {
  const S* data;
  int64_t ld;
};

// Block (i0, j0) of size rows x cols of x, widened into buf in x's own order, for Eigen to pack;
// returns the copy's leading dimension.
template <int Order, class S> int64_t widen(float* buf, Source<S> x, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
  constexpr bool col_major = Order == Eigen::ColMajor;
  const int64_t runs = col_major ? cols : rows, run = col_major ? rows : cols;  // the block's contiguous runs
  const S* first = x.data + (col_major ? i0 + j0 * x.ld : i0 * x.ld + j0);
  for (int64_t r = 0; r < runs; ++r) convert_contiguous(buf + r * run, first + r * x.ld, run);
  return run;
}

// Eigen's block sizes for a (rows x depth) · (depth x cols) product, as its gemm_blocking_space
// (with L3 blocking) and general_matrix_matrix_product::run compute them, and the rhs columns
// widened at once: whole blocks, at least 64 (a block may be as narrow as 4 columns). The lhs is
// widened a panel of mr rows at a time: Eigen packs each panel at row · depth, so panel by panel
// packs the block as one call would.
struct Blocking {
  static constexpr Eigen::Index mr = Eigen::internal::gebp_traits<float, float>::mr;
  Eigen::Index kc, mc, nc, wide_cols;
  // float32 scratch: a widened lhs panel, then widened rhs columns, 64-byte aligned (the packed
  // blocks are Eigen's own, on the stack or the heap as its float32 GEMM makes them)
  int64_t wide_a() const { return (kc * mr + 15) / 16 * 16; }
  int64_t floats() const { return wide_a() + (kc * wide_cols + 15) / 16 * 16; }
};
inline Blocking blocking(int64_t rows, int64_t cols, int64_t depth) {
  Eigen::Index kc = depth, mc = rows, nc = cols;
  Eigen::internal::computeProductBlockingSizes<float, float, 1>(kc, mc, nc, Eigen::Index(1));
  mc = std::min<Eigen::Index>(rows, mc), nc = std::min<Eigen::Index>(cols, nc);
  return {kc, mc, nc, std::min<Eigen::Index>(cols, (64 + nc - 1) / nc * nc)};
}

// res (rows x cols, column-major, leading dimension res_ld) += lhs · rhs over depth, in Eigen's
// loop (GeneralMatrixMatrix.h, the sequential branch), each block widened before it is packed.
template <class S, int LhsOrder, int RhsOrder>
void gemm(Source<S> lhs, Source<S> rhs, float* res, int64_t res_ld, int64_t rows, int64_t cols, int64_t depth, float* scratch) {
  using namespace Eigen::internal;
  using Index = Eigen::Index;
  using Traits = gebp_traits<float, float>;
  using LhsMapper = const_blas_data_mapper<float, Index, LhsOrder>;
  using RhsMapper = const_blas_data_mapper<float, Index, RhsOrder>;
  const Blocking blocks = blocking(rows, cols, depth);
  const auto [kc, mc, nc, wide_cols] = blocks;
  namespace internal = Eigen::internal;  // as Eigen's macro below names it
  ei_declare_aligned_stack_constructed_variable(float, block_a, kc * mc, 0);
  ei_declare_aligned_stack_constructed_variable(float, block_b, kc * nc, 0);
  float *wide_a = scratch, *wide_b = scratch + blocks.wide_a();
  gemm_pack_lhs<float, Index, LhsMapper, Traits::mr, Traits::LhsProgress, typename Traits::LhsPacket4Packing, LhsOrder> pack_lhs;
  gemm_pack_rhs<float, Index, RhsMapper, Traits::nr, RhsOrder> pack_rhs;
  gebp_kernel<float, float, Index, blas_data_mapper<float, Index, Eigen::ColMajor>, Traits::mr, Traits::nr, false, false> gebp;
  const blas_data_mapper<float, Index, Eigen::ColMajor> out(res, res_ld);
  const bool pack_rhs_once = mc != rows && kc == depth && nc == cols;
  for (Index i2 = 0; i2 < rows; i2 += mc) {
    const Index actual_mc = std::min(i2 + mc, rows) - i2;
    for (Index k2 = 0; k2 < depth; k2 += kc) {
      const Index actual_kc = std::min(k2 + kc, depth) - k2;
      for (Index r = 0; r < actual_mc; r += Blocking::mr) {
        const Index panel = std::min(actual_mc - r, Blocking::mr);
        pack_lhs(block_a + r * actual_kc, LhsMapper(wide_a, widen<LhsOrder>(wide_a, lhs, i2 + r, k2, panel, actual_kc)), actual_kc, panel);
      }
      for (Index j2 = 0, w0 = 0, wide_ld = 0; j2 < cols; j2 += nc) {  // wide_b holds rhs columns [w0, w0 + wide_cols)
        const Index actual_nc = std::min(j2 + nc, cols) - j2;
        if (!pack_rhs_once || i2 == 0) {
          if (j2 % wide_cols == 0) wide_ld = widen<RhsOrder>(wide_b, rhs, k2, w0 = j2, actual_kc, std::min(j2 + wide_cols, cols) - j2);
          pack_rhs(block_b, RhsMapper(wide_b, wide_ld).getSubMapper(0, j2 - w0), actual_kc, actual_nc);
        }
        gebp(out.getSubMapper(i2, j2), block_a, block_b, actual_mc, actual_kc, actual_nc, 1.0f);
      }
    }
  }
}
}  // namespace widening

// The float32 scratch one widening_gemm of (m, K) · (K, n) needs.
inline int64_t widening_gemm_scratch(int64_t m, int64_t K, int64_t n) { return widening::blocking(n, m, K).floats(); }

// c (a.rows x b.cols, row-major, leading dimension ldc) = a · b for 16-bit operands S, where
// takes_blocked_gemm holds. Eigen computes a row-major C as Cᵀ = Bᵀ·Aᵀ, column-major: Bᵀ is its
// left operand, column-major where B is row-major, and Aᵀ its right.
template <class S> void widening_gemm(const Operand& a, const Operand& b, float* c, int64_t ldc, float* scratch) {
  for (int64_t i = 0; i < a.rows; ++i) std::fill_n(c + i * ldc, b.cols, 0.0f);  // Eigen's kernel adds into C
  const widening::Source<S> lhs{(const S*)b.data, b.ld}, rhs{(const S*)a.data, a.ld};
  const auto run = [&](auto lhs_order, auto rhs_order) {
    widening::gemm<S, decltype(lhs_order)::value, decltype(rhs_order)::value>(lhs, rhs, c, ldc, b.cols, a.rows, a.cols, scratch);
  };
  using Col = std::integral_constant<int, Eigen::ColMajor>;
  using Row = std::integral_constant<int, Eigen::RowMajor>;
  if (b.row_major) a.row_major ? run(Col{}, Col{}) : run(Col{}, Row{});
  else a.row_major ? run(Row{}, Col{}) : run(Row{}, Row{});
}

}  // namespace ampgrad::cpu
