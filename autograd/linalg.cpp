// linalg.cpp — matmul and linear: the GEMM-shaped ops, lower precision under autocast (and mm,
// bmm: matmul with PyTorch's stricter shape rules).
// For C = A B the gradients are dA = G Bᵀ and dB = Aᵀ G (G = dL/dC); the transposes are
// views, read in place by the GEMM kernel. Letters: B batch, M/K/N matrix dims.
#include "autograd/op_support.h"
#include "tensor/cpu/loops.h"  // broadcast_shapes: geometry, shared by every backend

namespace ampgrad {

static void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  AMPGRAD_CHECK(a.device() == b.device(), op << ": expected tensors on one device, got " << a.device().str() << " and " << b.device().str());
}

// a (M, K) @ b (K, N), or a (B, M, K) @ b (B, K, N): one recorded GEMM.
static Tensor recorded_gemm(const Tensor& a, const Tensor& b) {
  Tensor out = kernels::gemm(a, b, {}, a.dtype());
  record("matmul", out, {a, b}, [a = save_if(b.requires_grad(), a), b = save_if(a.requires_grad(), b)](const Tensor& g, const Needs& need) {
    int64_t r = g.dim() - 2;  // the matrix dims are the last two
    return grads(need[0] ? recorded_gemm(g, b.get().transpose(r, r + 1)) : Tensor(),  // GEMMs themselves, so create_graph records them
                 need[1] ? recorded_gemm(a.get().transpose(r, r + 1), g) : Tensor());
  });
  return out;
}

// (op_support.h) B is the product of the batch dims, so an empty matrix folds too.
Tensor fold_batch(const Tensor& x, const Shape& batch) {
  Shape full = batch;
  full.insert(full.end(), x.shape().end() - 2, x.shape().end());
  return x.expand(full).reshape({numel_of(batch), x.size(-2), x.size(-1)});
}

// matmul after autocast: each case of ranks as a GEMM, calling itself (not matmul, which would
// consult autocast, and show in its trace, a second time) for the 1-D cases.
static Tensor matmul_after_autocast(const Tensor& a0, const Tensor& b0) {
  check_same_device("matmul", a0, b0);
  auto bad = [&] { return "matmul: cannot multiply shapes " + shape_str(a0.shape()) + " and " + shape_str(b0.shape()); };
  const int64_t da = a0.dim(), db = b0.dim();
  AMPGRAD_CHECK(da >= 1 && db >= 1 && a0.size(-1) == b0.size(db == 1 ? 0 : -2), bad());
  DType t = promote_types(a0.dtype(), b0.dtype());
  Tensor a = autograd::cast(a0, t), b = autograd::cast(b0, t);
  if (da == 1 && db == 1) return recorded_gemm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (da == 1) return matmul_after_autocast(a.unsqueeze(0), b).squeeze(-2);
  if (db == 1) return matmul_after_autocast(a, b.unsqueeze(1)).squeeze(-1);
  if (da == 2 && db == 2) return recorded_gemm(a, b);
  Shape out_shape(a.shape().begin(), a.shape().end() - 1);
  if (db == 2) {  // (..., M, K) @ (K, N): the batch dims fold into M, one GEMM
    out_shape.push_back(b.size(1));
    return recorded_gemm(a.reshape({-1, a.size(-1)}), b).reshape(out_shape);
  }
  // (..., M, K) @ (..., K, N): the batch dims broadcast as in PyTorch, and both operands are
  // expanded to them (expand's backward sums the gradient back) as one (B, M, K) @ (B, K, N).
  const Shape batch = cpu::broadcast_shapes("matmul", Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2));
  out_shape = batch;
  out_shape.insert(out_shape.end(), {a.size(-2), b.size(-1)});
  return recorded_gemm(fold_batch(a, batch), fold_batch(b, batch)).reshape(out_shape);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  auto [a, b] = cast_inputs(Op::matmul, a_in, b_in);
  return matmul_after_autocast(a, b);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  AMPGRAD_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected two 2-D tensors, got shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  AMPGRAD_CHECK(a.size(1) == b.size(0), "mm: cannot multiply shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  return matmul(a, b);
}
Tensor bmm(const Tensor& a, const Tensor& b) {
  AMPGRAD_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected two 3-D tensors, got shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape()));
  AMPGRAD_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "bmm: cannot multiply shapes " << shape_str(a.shape()) << " and " << shape_str(b.shape())
                                                                       << " (the batch sizes must be equal: bmm does not broadcast)");
  return matmul(a, b);
}

// y = x Wᵀ + b for checked, cast operands: x (N, Din), weight (Dout, Din), bias (Dout) -> y (N, Dout)
static Tensor linear_2d(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor wt = w.as_strided({w.size(1), w.size(0)}, {w.stride(1), w.stride(0)}, w.storage_offset());  // Wᵀ, a view
  Tensor out = kernels::gemm(x, wt, b, x.dtype());  // the bias added before the one rounding
  record("linear", out, {x, w, b}, [x = save_if(w.requires_grad(), x), w = save_if(x.requires_grad(), w)](const Tensor& g, const Needs& need) {
    return grads(need[0] ? recorded_gemm(g, w) : Tensor(),      // dx = G W        (N, Din)
                 need[1] ? recorded_gemm(g.t(), x) : Tensor(),  // dW = Gᵀ x       (Dout, Din)
                 need[2] ? sum(g, {0}) : Tensor());             // db = Σ_n G      (Dout)
  });
  return out;
}

void check_linear_shapes(const char* op, const Tensor& x, const Tensor& w, const Tensor& b) {
  AMPGRAD_CHECK(x.defined() && w.defined() && w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1),
                op << ": input of shape " << (x.defined() ? shape_str(x.shape()) : "(undefined)") << " does not match weight of shape "
                   << (w.defined() ? shape_str(w.shape()) : "(undefined)"));
  AMPGRAD_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0)), op << ": bias of shape " << shape_str(b.shape()) << " does not match weight " << shape_str(w.shape()));
}

// x (..., Din): the leading dims fold into N. Where a LinearRouteGuard holds a route (amp/autocast.h's
// dispatch hook), the route runs instead: a copy of it, as it may suspend the routes while it runs.
Tensor linear(const Tensor& x_in, const Tensor& w_in, const Tensor& b_in) {
  if (x_in.defined())
    if (const amp::LinearRoute route = amp::linear_route(x_in.device().type)) return route(x_in, w_in, b_in);
  auto [x, w, b] = cast_inputs<2>(Op::linear, x_in, w_in, b_in);
  check_linear_shapes("linear", x, w, b);
  AMPGRAD_CHECK(x.dtype() == w.dtype() && (!b.defined() || b.dtype() == w.dtype()),
                "linear: input, weight and bias dtypes differ (" << dtype_name(x.dtype()) << ", " << dtype_name(w.dtype())
                                                                 << (b.defined() ? std::string(", ") + dtype_name(b.dtype()) : "") << ")");
  // Structured bindings are captured by init-capture: clang before 16 cannot capture them directly.
  return over_rows(x, [&w = w, &b = b](const Tensor& rows) { return linear_2d(rows, w, b); });
}

}  // namespace ampgrad
