// reduce.cpp — sum, mean, max/min (with indices), argmax.
// The gradient of a reduction is the output gradient spread back over the reduced dims:
// broadcast for sum (and divided by the count for mean), routed to the chosen index for max.
#include <numeric>

#include "autograd/op_support.h"

namespace ampgrad {

// The output's shape with the reduced dims kept as size 1, so g broadcasts against x.
static Shape keepdim_shape(const Shape& x_shape, const Shape& dims) {
  if (dims.empty() || x_shape.empty()) return Shape(x_shape.size(), 1);
  Shape s = x_shape;
  for (int64_t d : dims) s[d < 0 ? d + (int64_t)s.size() : d] = 1;
  return s;
}

static int64_t reduced_count(const Tensor& x, const Shape& dims) {
  if (dims.empty() || x.dim() == 0) return x.numel();
  int64_t n = 1;
  for (int64_t d : dims) n *= x.size(d);
  return n;
}

Tensor sum(const Tensor& x_in, const Shape& dims, bool keepdim) {
  auto [x] = cast_inputs(Op::sum, x_in);
  Tensor out = kernels::sum(x, dims, keepdim);
  record("sum", out, {x}, [x_shape = x.shape(), dims](const Tensor& g, const Needs&) {
    return grads(g.reshape(keepdim_shape(x_shape, dims)).expand(x_shape));
  });
  return out;
}

Tensor mean(const Tensor& x_in, const Shape& dims, bool keepdim) {
  auto [x] = cast_inputs(Op::mean, x_in);
  require_floating("mean", x.dtype());
  const double n = (double)reduced_count(x, dims);
  Tensor out = kernels::sum(widened(x), dims, keepdim);
  kernels::mul_(out, 1.0 / n);
  out = rounded_to(out, x.dtype());
  record("mean", out, {x}, [x_shape = x.shape(), dims, n](const Tensor& g, const Needs&) {
    return grads(scaled(g, 1.0 / n).reshape(keepdim_shape(x_shape, dims)).expand(x_shape));
  });
  return out;
}

static std::pair<Tensor, Tensor> extreme(Op op, const Tensor& x_in, int64_t dim, bool keepdim, bool is_min) {
  auto [x] = cast_inputs(op, x_in);
  auto [values, indices] = kernels::max_dim(x, dim, keepdim, is_min);
  record(is_min ? "min" : "max", values, {x}, [x_shape = x.shape(), dim, keepdim, idx = indices](const Tensor& g, const Needs&) {
    // the whole gradient goes to the element that was chosen
    if (x_shape.empty()) return grads(g);  // a 0-d x is its own maximum
    Tensor gk = keepdim ? g : g.unsqueeze(dim), ik = keepdim ? idx : idx.unsqueeze(dim);
    return grads(autograd::scatter_add(x_shape, dim, ik, gk.contiguous()));
  });
  return {values, indices};
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { return extreme(Op::max, x, dim, keepdim, false); }
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { return extreme(Op::min, x, dim, keepdim, true); }
// Over all elements, tied extremes share the gradient evenly, as in PyTorch.
static Tensor extreme_all(Op op, const Tensor& x_in, bool is_min) {
  auto [x] = cast_inputs(op, x_in);
  Tensor out = kernels::max_dim(x.detach().reshape({-1}), 0, false, is_min).first;  // 0-d
  record(is_min ? "min" : "max", out, {x}, [x = Saved(x), y = Saved(out)](const Tensor& g, const Needs&) {
    // a NaN maximum came from the NaNs, which eq cannot find
    Tensor hit = to(where(ne(y, y), ne(x, x), eq(x, y)), g.dtype());
    return grads(hit * (g / sum(hit)));
  });
  return out;
}
Tensor max(const Tensor& x) { return extreme_all(Op::max, x, false); }
Tensor min(const Tensor& x) { return extreme_all(Op::min, x, true); }

Tensor argmax(const Tensor& x_in, std::optional<int64_t> dim, bool keepdim) {
  auto [x] = cast_inputs(Op::argmax, x_in);
  if (!dim) return kernels::max_dim(x.reshape({-1}), 0, false, false).second;
  return kernels::max_dim(x, *dim, keepdim, false).second;
}

}  // namespace ampgrad
