// loops.h — the CPU's strided iteration: every elementwise kernel is one call of for_each_run
// (but the contiguous 16-bit casts, which half_convert.h does in one vectorised pass).
// A tensor of any rank and strides (broadcast dims have stride 0) is walked as a list of
// "runs": 1-D stretches along the innermost dim, after merging dims that are contiguous in
// every operand, so a contiguous tensor is a single run the compiler can vectorise. Large
// walks are split between threads (parallel.h); each output element is written by one thread.
#pragma once
#include <array>

#include "tensor/backends.h"
#include "tensor/cpu/parallel.h"

namespace ampgrad::cpu {

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides that read `t` as if it had shape `out` (broadcast dims get stride 0).
Shape broadcast_strides(const Tensor& t, const Shape& out);

// x itself when it is already contiguous in `dtype`, else a contiguous copy converted to it.
Tensor contiguous_copy(const Tensor& x, DType dtype);
inline Tensor contiguous_copy(const Tensor& x) { return contiguous_copy(x, x.dtype()); }

// Reduction geometry (reduce.cpp), shared with the CUDA backend: `dims` wrapped, deduplicated
// and sorted; and x viewed as [kept dims..., reduced dims...] with the output's shape.
Shape normalize_dims(const char* op, const Shape& dims, int64_t ndim);
std::pair<Tensor, Shape> move_reduced_last(const Tensor& x, const Shape& reduced, bool keepdim);

// Calls run(ptrs, inner_strides, n) for each innermost run, where ptrs[k] points at the run's
// first element of operand k. Operands are (base pointer, element size, strides over `shape`).
template <size_t N, class F>
void for_each_run(const Shape& shape, std::array<char*, N> base, std::array<size_t, N> elsize,
                  std::array<Shape, N> strides, F&& run) {
  // Merge dim i into dim i+1 when every operand steps over it contiguously.
  Shape sh;
  std::array<Shape, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;  // size-1 dims add nothing to the walk
    bool merge = !sh.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      sh.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      sh.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  if (sh.empty()) {  // a single element
    std::array<int64_t, N> zero{};
    run(base, zero, int64_t(1));
    return;
  }
  const size_t nd = sh.size();
  const int64_t inner = sh[nd - 1];
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = st[k][nd - 1];
  // Each thread walks its own stretch [begin, end) of the elements in row-major order: the
  // odometer starts at `begin`, and only a stretch's first and last runs can be partial.
  parallel_for(numel_of(sh), 1, [&](int64_t begin, int64_t end) {
    Shape idx(nd);
    std::array<char*, N> p = base;
    int64_t rest = begin;
    for (int64_t d = (int64_t)nd - 1; d >= 0; --d) {
      idx[d] = rest % sh[d];
      rest /= sh[d];
      for (size_t k = 0; k < N; ++k) p[k] += idx[d] * st[k][d] * (int64_t)elsize[k];
    }
    for (int64_t i = begin;;) {
      const int64_t n = std::min(inner - idx[nd - 1], end - i);
      run(p, inner_stride, n);
      if ((i += n) == end) return;
      // back to the start of this run's row, then advance the odometer over the outer dims
      for (size_t k = 0; k < N; ++k) p[k] -= idx[nd - 1] * st[k][nd - 1] * (int64_t)elsize[k];
      idx[nd - 1] = 0;
      for (int64_t d = (int64_t)nd - 2; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) p[k] += st[k][d] * (int64_t)elsize[k];
        if (++idx[d] < sh[d]) break;
        for (size_t k = 0; k < N; ++k) p[k] -= st[k][d] * sh[d] * (int64_t)elsize[k];
        idx[d] = 0;
      }
    }
  });
}

}  // namespace ampgrad::cpu
