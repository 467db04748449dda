// loops.h — the C++ side's helpers for CUDA kernels: a Loop<N> (launch.h) describing tensors of
// any geometry, and allocation on a tensor's device. Compiled by g++ only (it sees Tensor); the
// kernels that walk a Loop are in loops.cuh.
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

}  // namespace ampgrad::cuda
