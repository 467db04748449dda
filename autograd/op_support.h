// op_support.h — what every op file of autograd/ uses: the three steps of an op (autocast,
// kernel, record) and their names, brought into namespace ampgrad. Included by autograd/*.cpp
// only; the public API is autograd/ops.h.
#pragma once
#include "autograd/cast.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace ampgrad {
using amp::Op;
using autograd::cast_inputs;
using autograd::grads;
using autograd::Needs;
using autograd::record;
using autograd::Saved;

// g · factor, with the factor applied in float32 or wider. (g * factor would first round the
// factor to g's dtype: 1/70000 is 0 in float16, and 1/0.9 is 1.1113.) Recorded, its derivative
// being the same scaling, so a backward that scales can be differentiated again.
inline Tensor scaled(const Tensor& g, double factor) {
  Tensor out = g.detach().clone();
  kernels::mul_(out, factor);
  record("scaled", out, {g}, [factor](const Tensor& gg, const Needs&) { return grads(scaled(gg, factor)); });
  return out;
}

// A float16/bfloat16 tensor summed as float32, and the result rounded back once at the end, as
// PyTorch's mean and losses do: summed in float16, 40,000 losses of 2.3 would overflow before
// the division brought them back. (Differentiable casts, with no autocast consultation.)
inline Tensor widened(const Tensor& x) { return is_half(x.dtype()) ? autograd::cast(x, kFloat32) : x; }
inline Tensor rounded_to(const Tensor& x, DType dtype) { return autograd::cast(x, dtype); }

// linear's shape rule, shared by the ops a linear route runs: x (..., Din), weight (Dout, Din), bias (Dout).
void check_linear_shapes(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias);

// matmul's and attention's batch broadcast (linalg.cpp): x (..., M, N) expanded to the batch dims
// `batch` and folded into one (B, M, N); expand's backward sums the gradient back.
Tensor fold_batch(const Tensor& x, const Shape& batch);

// A linear of any rank: x (..., Din) as rows (N, Din) for a 2-D body, the result put back to (..., Dout).
template <class Body> Tensor over_rows(const Tensor& x, Body body) {
  if (x.dim() == 2) return body(x);
  Tensor y = body(x.reshape({-1, x.size(-1)}));
  Shape out_shape = x.shape();
  out_shape.back() = y.size(-1);
  return y.reshape(out_shape);
}

// A tensor a backward reads for one input's gradient only, saved only if that input wants one,
// as PyTorch's generated backwards do: a GEMM with a frozen weight keeps no activation, and
// x * mask (dropout) keeps the mask alone.
inline Saved save_if(bool wanted, const Tensor& t) { return Saved(wanted ? t : Tensor()); }

namespace autograd {
// Backward ops: kernels recorded with their adjoint as their own backward (shape.cpp), so the
// backwards that call them (max, max_pool2d, index_select, embedding) are differentiable again.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);                             // ⟷ scatter_add
Tensor scatter_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src);  // ⟷ gather
Tensor index_add(const Shape& shape, int64_t dim, const Tensor& index, const Tensor& src);    // ⟷ index_select
}  // namespace autograd
}  // namespace ampgrad
