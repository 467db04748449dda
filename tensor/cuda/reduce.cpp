// reduce.cpp — the C++ side of CUDA reductions, gather/scatter and index_select/index_add: the
// CPU backend's checks, dim handling and error text (tensor/cpu/reduce.cpp), then one launcher of
// reduce.cu.
// As on the CPU, reduced dims move last (a view) and are made contiguous, unless they already
// lead a contiguous tensor, which is summed down its columns without a copy.
#include <numeric>

#include "tensor/cuda/loops.h"

namespace ampgrad::cuda {
using namespace ampgrad::kernels;

Tensor sum(const Tensor& x, const Shape& dims_in, bool keepdim) {
  Shape red = dims_in.empty() ? Shape() : cpu::normalize_dims("sum", dims_in, x.dim());
  if (dims_in.empty()) { red.resize(x.dim()); std::iota(red.begin(), red.end(), 0); }
  auto [moved, out_shape] = cpu::move_reduced_last(x, red, keepdim);
  int64_t R = 1;
  for (int64_t d : red) R *= x.shape()[d];
  const int64_t rows = R == 0 ? numel_of(out_shape) : x.numel() / R;
  Tensor out = empty_on(x, out_shape, x.is_floating_point() ? x.dtype() : kInt64);
  bool leading = x.is_contiguous() && !red.empty() && red.back() == (int64_t)red.size() - 1;
  if (leading && rows > 1) {  // out[j] = sum_i x[i, j]
    launch_sum_columns(x.dtype(), x.raw_data(), out.raw_data(), R, rows, x.device().index);
  } else {
    Tensor c = contiguous(moved);
    launch_sum_rows(x.dtype(), c.raw_data(), out.raw_data(), rows, R, x.device().index);
  }
  return out;
}

std::pair<Tensor, Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_min) {
  const char* op = is_min ? "min" : "max";
  Shape red = cpu::normalize_dims(op, {dim}, x.dim());  // empty only for a 0-d x
  auto [moved, out_shape] = cpu::move_reduced_last(x, red, keepdim);
  const int64_t R = x.dim() == 0 ? 1 : x.shape()[red[0]], rows = x.numel() / R;
  Tensor values = empty_on(x, out_shape, x.dtype()), indices = empty_on(x, out_shape, kInt64);
  Tensor c = contiguous(moved);
  launch_max_rows(x.dtype(), c.raw_data(), values.raw_data(), indices.data_ptr<int64_t>(), rows, R, is_min);
  return {values, indices};
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = cpu::normalize_dims("gather", {dim}, x.dim())[0];
  Tensor xc = contiguous(x), out = empty_on(x, index.shape(), x.dtype());
  IndexGeometry g = index_geometry("gather", x.shape(), dim, index);
  Tensor ic = contiguous(index);
  launch_gather(x.dtype(), xc.raw_data(), ic.data_ptr<int64_t>(), out.raw_data(), g);
  return out;
}

// Atomic adds: where several index entries name one position, the order of their additions
// (and so the last bits of a floating sum) may differ from run to run.
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = cpu::normalize_dims("scatter_add", {dim}, (int64_t)shape.size())[0];
  Tensor out = zeros(shape, TensorOptions(src.dtype()).device(src.device())), sc = contiguous(src);
  IndexGeometry g = index_geometry("scatter_add", shape, dim, index);
  Tensor ic = contiguous(index);
  launch_scatter_add(src.dtype(), sc.raw_data(), ic.data_ptr<int64_t>(), out.raw_data(), g);
  return out;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = cpu::normalize_dims("index_select", {dim}, x.dim())[0];
  Shape out_shape = x.shape();
  out_shape[dim] = index.numel();
  Tensor xc = contiguous(x), ic = contiguous(index), out = empty_on(x, out_shape, x.dtype());
  launch_index_select(x.dtype(), xc.raw_data(), ic.data_ptr<int64_t>(), out.raw_data(), slice_geometry(x.shape(), dim, index.numel()));
  return out;
}

// Atomic adds, as scatter_add's: a slice named twice gets its rows in either order.
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  dim = cpu::normalize_dims("index_add", {dim}, (int64_t)shape.size())[0];
  Tensor out = zeros(shape, TensorOptions(src.dtype()).device(src.device())), sc = contiguous(src), ic = contiguous(index);
  launch_index_add(src.dtype(), sc.raw_data(), ic.data_ptr<int64_t>(), out.raw_data(), slice_geometry(shape, dim, index.numel()));
  return out;
}

}  // namespace ampgrad::cuda
