// indexing.h — where a CUDA thread's elements live: the index math of the elementwise loop, the
// image kernels and gather/scatter, written once for host and device (AMPGRAD_HD), so
// tests/test_cuda_host.cpp runs it on the CPU against the CPU backend's own kernels. The
// kernels (loops.cuh, image.cu, reduce.cu) keep only their loads, stores and arithmetic.
//
// Coordinates are divided in an Index type: uint32_t when every position of a launch fits in 32
// bits (all launches in practice), int64_t otherwise. The GPU divides 64-bit integers in
// software, dozens of instructions, so a broadcast add or an im2col would otherwise spend more
// time finding its elements than moving them. The bound is the same for every thread of a
// launch, so a warp never diverges on it:
//
//   const int64_t src = fits_32bit(total) ? im2col_source(g, uint32_t(e)) : im2col_source(g, e);
#pragma once
#include <cstdint>

#include "tensor/cuda/launch.h"
#include "tensor/host_device.h"

namespace ampgrad::cuda {

AMPGRAD_HD inline bool fits_32bit(int64_t n) { return n <= int64_t(UINT32_MAX); }

// ---- the elementwise loop: Loop<N> (launch.h) ----

// Adds to off[k] the offset of linear position i (row-major over loop.shape) in operand k: one
// % and one / per dim give i's coordinates, and each operand's strides weigh them.
template <class Index, int N> AMPGRAD_HD inline void add_offsets(const Loop<N>& loop, Index i, int64_t (&off)[N]) {
  for (int d = loop.ndim - 1; d >= 0; --d) {
    const Index size = Index(loop.shape[d]), c = i % size;
    i /= size;
    for (int k = 0; k < N; ++k) off[k] += int64_t(c) * loop.strides[k][d];
  }
}

// Element offsets of linear position i in each operand.
template <int N> AMPGRAD_HD inline void loop_offsets(const Loop<N>& loop, int64_t i, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = loop.contiguous ? i : 0;
  if (loop.contiguous) return;
  if (fits_32bit(loop.numel)) add_offsets(loop, uint32_t(i), off);
  else add_offsets(loop, i, off);
}

// Whether every operand of loop can move in runs of V neighbours, each run one aligned vector
// load or store (loops.cuh): each operand is dense along the last dim, its other strides and its
// start (aligned to 16 bytes, the widest vector) are multiples of V, so every run starts aligned,
// and the last dim divides into runs. A contiguous loop needs no division: its numel % V last
// elements go one at a time. Operand 0's shape is the loop's, so a broadcast operand (stride 0)
// qualifies only along the other dims, as a bias does along the rows.
template <int N> AMPGRAD_HD inline bool moves_in_runs(const Loop<N>& loop, int V) {
  if (V == 1 || loop.ndim == 0 || loop.numel < V) return false;
  const int last = loop.ndim - 1;
  if (!loop.contiguous && loop.shape[last] % V != 0) return false;
  for (int k = 0; k < N; ++k) {
    if (reinterpret_cast<uintptr_t>(loop.data[k]) % 16 != 0 || loop.strides[k][last] != 1) return false;
    for (int d = 0; d < last; ++d)
      if (loop.strides[k][d] % V != 0) return false;
  }
  return true;
}

// ---- the image kernels: ImageGeometry (launch.h), x (N, C, H, W), cols (N*Ho*Wo, C*kh*kw) ----

// im2col: the position in x that cols entry e copies, or -1 where the window hangs over the
// zero padding.   cols[(n, oh, ow), (c, i, j)] = x[n, c, oh*s - p + i, ow*s - p + j]
template <class Index> AMPGRAD_HD inline int64_t im2col_source(const ImageGeometry& g, Index e) {
  const Index kh = Index(g.kh), kw = Index(g.kw), Ho = Index(g.Ho), Wo = Index(g.Wo), K = Index(g.C) * kh * kw;
  const Index row = e / K, col = e % K;
  const Index j = col % kw, i = col / kw % kh, c = col / (kw * kh);
  const Index ow = row % Wo, oh = row / Wo % Ho, n = row / (Wo * Ho);
  const int64_t h = int64_t(oh) * g.stride - g.pad + i, w = int64_t(ow) * g.stride - g.pad + j;
  if (h < 0 || h >= g.H || w < 0 || w >= g.W) return -1;
  return ((int64_t(n) * g.C + c) * g.H + h) * g.W + w;
}

// col2im: pixel e of x was read by im2col for every output (oh, ow) whose window covers it,
// oh in [oh_begin, oh_end) and ow in [ow_begin, ow_end); at(oh, ow) is that cols entry. Summing
// oh, then ow, ascending is the CPU's order, so float32 and float64 sums have the CPU's bits.
struct PixelSources {
  int64_t n, c, h, w, oh_begin, oh_end, ow_begin, ow_end;
  // cols[(n, oh, ow), (c, i, j)] with i = h + p - oh*s and j = w + p - ow*s
  AMPGRAD_HD int64_t at(const ImageGeometry& g, int64_t oh, int64_t ow) const {
    const int64_t i = h + g.pad - oh * g.stride, j = w + g.pad - ow * g.stride;
    return ((n * g.Ho + oh) * g.Wo + ow) * (g.C * g.kh * g.kw) + (c * g.kh + i) * g.kw + j;
  }
};
// The outputs o whose window [o*s - p, o*s - p + k) holds coordinate x: ceil((x + p - k + 1) / s)
// up to floor((x + p) / s), within [0, out). Non-negative operands, so / rounds down.
AMPGRAD_HD inline void covering(int64_t x, int64_t k, int64_t s, int64_t p, int64_t out, int64_t& begin, int64_t& end) {
  const int64_t first = x + p - k + 1;
  begin = first > 0 ? (first + s - 1) / s : 0;
  const int64_t last = (x + p) / s + 1;
  end = last < out ? last : out;
}
template <class Index> AMPGRAD_HD inline PixelSources col2im_sources(const ImageGeometry& g, Index e) {
  const Index H = Index(g.H), W = Index(g.W), C = Index(g.C);
  PixelSources src{int64_t(e / (W * H * C)), int64_t(e / (W * H) % C), int64_t(e / W % H), int64_t(e % W), 0, 0, 0, 0};
  covering(src.h, g.kh, g.stride, g.pad, g.Ho, src.oh_begin, src.oh_end);
  covering(src.w, g.kw, g.stride, g.pad, g.Wo, src.ow_begin, src.ow_end);
  return src;
}

// max_pool2d: output e's window, whose (i, j) element sits at plane + at(i, j) in x; at(i, j)
// itself is the flat position within the (n, c) plane of H*W that max_pool2d returns as index.
struct PoolWindow {
  int64_t plane, top, left, W;
  AMPGRAD_HD int64_t at(int64_t i, int64_t j) const { return (top + i) * W + left + j; }
};
template <class Index> AMPGRAD_HD inline PoolWindow pool_window(const ImageGeometry& g, Index e) {
  const Index Ho = Index(g.Ho), Wo = Index(g.Wo);
  const Index ow = e % Wo, oh = e / Wo % Ho, nc = e / (Wo * Ho);
  return {int64_t(nc) * g.H * g.W, int64_t(oh) * g.stride, int64_t(ow) * g.stride, g.W};
}

// ---- gather / scatter_add: IndexGeometry (launch.h) ----

// The position in the contiguous full tensor named by element k of the index, which holds i
// (checked to be in range by the caller): k's coordinates, with i in place of the one along g.dim.
template <class Index> AMPGRAD_HD inline int64_t indexed_position(const IndexGeometry& g, Index k, int64_t i) {
  int64_t pos = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const Index size = Index(g.index_shape[d]), c = k % size;
    k /= size;
    pos += (d == g.dim ? i : int64_t(c)) * g.strides[d];
  }
  return pos;
}

// ---- index_select / index_add: SliceGeometry (launch.h) ----

// Element k of the selected tensor (outer, n, inner) belongs to slice number slice_of(g, k); with
// that slice's index value s (checked to be in range by the caller) it is at slice_position in
// the full tensor (outer, size, inner).
template <class Index> AMPGRAD_HD inline int64_t slice_of(const SliceGeometry& g, Index k) { return int64_t(k / Index(g.inner) % Index(g.n)); }
template <class Index> AMPGRAD_HD inline int64_t slice_position(const SliceGeometry& g, Index k, int64_t s) {
  const Index inner = Index(g.inner), i = k % inner, a = k / (inner * Index(g.n));
  return (int64_t(a) * g.size + s) * g.inner + int64_t(i);
}

}  // namespace ampgrad::cuda
