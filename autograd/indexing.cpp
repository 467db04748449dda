// indexing.cpp — index_select, and the three index ops backwards are made of (gather,
// scatter_add, index_add): kernels recorded with their adjoint as their own backward, so the
// backwards that call them (max, max_pool2d, index_select, embedding) are differentiable again.
#include "autograd/op_support.h"

namespace ampgrad {

Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index) {
  auto [x] = cast_inputs(Op::index_select, x_in);
  AMPGRAD_CHECK(index.device() == x.device(), "index_select: index on " << index.device().str() << ", input on " << x.device().str());
  Tensor out = kernels::index_select(x, dim, index);
  record("index_select", out, {x}, [index = Saved(index.detach()), in_shape = x.shape(), dim](const Tensor& g, const Needs&) {
    return grads(autograd::index_add(in_shape, dim, index, g));
  });
  return out;
}

namespace autograd {
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = kernels::index_add(shape, dim, index, src);
  record("index_add", out, {src}, [index = Saved(index), dim](const Tensor& g, const Needs&) { return grads(g.index_select(dim, index)); });
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = kernels::gather(x, dim, index);
  record("gather", out, {x}, [index = Saved(index), dim, shape = x.shape()](const Tensor& g, const Needs&) {
    return grads(scatter_add(shape, dim, index, g.contiguous()));
  });
  return out;
}

Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = kernels::scatter_add(shape, dim, index, src);
  record("scatter_add", out, {src}, [index = Saved(index), dim](const Tensor& g, const Needs&) { return grads(gather(g, dim, index)); });
  return out;
}
}  // namespace autograd

}  // namespace ampgrad
