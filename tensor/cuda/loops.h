// loops.h — the C++ side's helpers for CUDA kernels: the launch geometries of launch.h built
// from tensors (a Loop<N> over tensors of any strides, an image's, an index's), and allocation
// on a tensor's device. Compiled by g++ only (it sees Tensor); what each kernel thread makes of
// a geometry is indexing.h's, and tests/test_cuda_host.cpp checks the two together on the CPU.
//
//   Tensor out = empty_on(x, x.shape(), x.dtype());
//   launch_unary(op, x.dtype(), make_loop<2>(unary_name(op), out.shape(), {&out, &x}));
#pragma once
#include <array>

#include "tensor/backends.h"
#include "tensor/cpu/loops.h"  // broadcast_shapes, broadcast_strides: geometry, not CPU code
#include "tensor/cuda/launch.h"

namespace ampgrad::cuda {

inline Tensor empty_on(const Tensor& like, const Shape& shape, DType dtype) {
  return empty(shape, TensorOptions(dtype).device(like.device()));
}

// x itself when contiguous, else a contiguous copy on its device.
inline Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor c = empty_on(x, x.shape(), x.dtype());
  cuda::copy_(c, x);
  return c;
}

// Operands ts over `shape` (operand 0, the output, has that shape; the others broadcast into it).
// Size-1 dims are dropped and a dim is merged into the one before when every operand steps over
// the pair densely (as for_each_run does), so same-shape contiguous operands become one dim and
// take the kernels' fast path.
template <int N> Loop<N> make_loop(const char* op, const Shape& shape, std::array<const Tensor*, N> ts) {
  Loop<N> loop{};
  loop.numel = numel_of(shape);
  std::array<Shape, N> strides;
  for (int k = 0; k < N; ++k) {
    loop.data[k] = ts[k]->raw_data();
    strides[k] = cpu::broadcast_strides(*ts[k], shape);
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const int last = loop.ndim - 1;
    bool merge = loop.ndim > 0;
    for (int k = 0; k < N && merge; ++k) merge = loop.strides[k][last] == strides[k][d] * shape[d];
    if (merge) {
      loop.shape[last] *= shape[d];
      for (int k = 0; k < N; ++k) loop.strides[k][last] = strides[k][d];
      continue;
    }
    AMPGRAD_CHECK(loop.ndim < kMaxDims, op << ": CUDA kernels index at most " << kMaxDims
                                           << " dims (after merging dense ones), got shape " << shape_str(shape));
    loop.shape[loop.ndim] = shape[d];
    for (int k = 0; k < N; ++k) loop.strides[k][loop.ndim] = strides[k][d];
    ++loop.ndim;
  }
  loop.contiguous = loop.ndim == 0;
  if (loop.ndim == 1) {
    loop.contiguous = true;
    for (int k = 0; k < N; ++k) loop.contiguous = loop.contiguous && loop.strides[k][0] == 1;
  }
  return loop;
}

// x (N, C, H, W) under a kh x kw window with stride s and padding p.
inline ImageGeometry image_geometry(const Shape& x_shape, int64_t kh, int64_t kw, int64_t s, int64_t p) {
  const int64_t H = x_shape[2], W = x_shape[3];
  return {x_shape[0], x_shape[1], H, W, kernels::window_out_size(H, kh, s, p), kernels::window_out_size(W, kw, s, p), kh, kw, s, p};
}

// An int64 index addressing a contiguous tensor of `shape` along `dim` (checked in
// tensor/kernels.cpp). Index values are checked in the kernel, where they are.
inline IndexGeometry index_geometry(const char* op, const Shape& shape, int64_t dim, const Tensor& index) {
  AMPGRAD_CHECK(index.dim() <= kMaxDims, op << ": CUDA kernels index at most " << kMaxDims << " dims, got shape " << shape_str(shape));
  IndexGeometry g{};
  g.ndim = (int)index.dim();
  g.dim = (int)dim;
  g.numel = index.numel();
  g.dim_size = shape.empty() ? 1 : shape[dim];
  const Shape strides = contiguous_strides(shape);
  for (int d = 0; d < g.ndim; ++d) {
    g.index_shape[d] = index.shape()[d];
    g.strides[d] = strides[d];
  }
  return g;
}

// A tensor of `shape` as (outer, size, inner) around `dim`, of which n slices are selected.
inline SliceGeometry slice_geometry(const Shape& shape, int64_t dim, int64_t n) {
  SliceGeometry g{1, shape[dim], n, 1, int(dim)};
  for (int64_t d = 0; d < dim; ++d) g.outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) g.inner *= shape[d];
  return g;
}

}  // namespace ampgrad::cuda
