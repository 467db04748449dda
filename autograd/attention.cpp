// attention.cpp — scaled_dot_product_attention as one op with its own backward, PyTorch's name
// and semantics for attention without a mask tensor or dropout (nn/attention.cpp composes those):
//   S = Q Kᵀ, P = softmax(scale·S) along the keys (causally: query i sees keys 0..i), O = P V,
// two GEMMs around one fused masked softmax (tensor/primitives.inc's attention_softmax), P kept
// once for the backward. 16-bit inputs: S and dP are the GEMMs' float32 accumulators, the softmax
// runs in float32, and P, O and each gradient round once.
// Letters: B batch (any leading dims, heads included), L queries, S keys, E head dim, Ev value dim.
#include <cmath>

#include "autograd/op_support.h"
#include "tensor/cpu/loops.h"  // broadcast_shapes: geometry, shared by every backend

namespace ampgrad {

// The op in the library's own ops (the causal mask by arange, ge and where), in float32 for
// 16-bit inputs: what a create_graph backward differentiates, the fused kernels being opaque to it.
static autograd::CompositeFn attention_composite(bool is_causal, double scale) {
  return [is_causal, scale](const std::vector<Tensor>& in) {
    Tensor s = scaled(matmul(widened(in[0]), widened(in[1]).transpose(1, 2)), scale);  // (B, L, S)
    if (is_causal) {
      const TensorOptions on = TensorOptions(kInt64).device(s.device());
      s = where(ge(arange(s.size(1), on).unsqueeze(1), arange(s.size(2), on).unsqueeze(0)), s, scalar_like(-INFINITY, s));
    }
    return rounded_to(matmul(softmax(s, -1), widened(in[2])), in[0].dtype());
  };
}

// q (B, L, E), k (B, S, E), v (B, S, Ev) of one floating dtype -> O (B, L, Ev)
static Tensor attention_3d(const Tensor& q, const Tensor& k, const Tensor& v, bool is_causal, double scale) {
  const DType math = q.dtype() == kFloat64 ? kFloat64 : kFloat32;
  auto mT = [](const Tensor& t) { return t.detach().transpose(1, 2); };  // a view, which the GEMM reads in place
  const Tensor p = kernels::attention_softmax(kernels::gemm(q, mT(k), {}, math), scale, is_causal, q.dtype());  // P (B, L, S)
  Tensor out = kernels::gemm(p, v, {}, p.dtype());
  record("scaled_dot_product_attention", out, {q, k, v},
         [q = Saved(q), k = Saved(k), v = Saved(v), p, is_causal, scale, math, mT](const Tensor& g, const Needs& need) {
           if (autograd::recording_backward()) return autograd::composite_backward(attention_composite(is_causal, scale), {q, k, v}, g, need);
           // scale·dS = scale·P ⊙ (dP − Σ_j P ⊙ dP), dP = dO Vᵀ (B, L, S); its masked entries are zeros
           const Tensor ds = need[0] || need[1] ? kernels::attention_softmax_backward(p, kernels::gemm(g, mT(v), {}, math), scale, is_causal) : Tensor();
           return grads(need[0] ? kernels::gemm(ds, k, {}, ds.dtype()) : Tensor(),      // dQ = scale·dS K    (B, L, E)
                        need[1] ? kernels::gemm(mT(ds), q, {}, ds.dtype()) : Tensor(),  // dK = scale·dSᵀ Q   (B, S, E)
                        need[2] ? kernels::gemm(mT(p), g, {}, p.dtype()) : Tensor());   // dV = Pᵀ dO         (B, S, Ev)
         });
  return out;
}

// The batch dims broadcast, as matmul's: each operand is expanded to them and folded into one
// (B, ·, ·), and the result unfolded (expand's backward sums the gradients back).
Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool is_causal, std::optional<double> scale) {
  auto [q, k, v] = cast_inputs(Op::scaled_dot_product_attention, q_in, k_in, v_in);
  const char* op = "scaled_dot_product_attention";
  AMPGRAD_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2),
                op << ": expected q (..., L, E), k (..., S, E), v (..., S, Ev), got q " << shape_str(q.shape()) << ", k " << shape_str(k.shape())
                   << ", v " << shape_str(v.shape()));
  AMPGRAD_CHECK(q.device() == k.device() && k.device() == v.device(),
                op << ": q, k and v on " << q.device().str() << ", " << k.device().str() << " and " << v.device().str());
  const DType t = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
  require_floating(op, t);
  auto batch_of = [](const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 2); };
  const Shape batch = cpu::broadcast_shapes(op, cpu::broadcast_shapes(op, batch_of(q), batch_of(k)), batch_of(v));
  auto folded = [&batch, t](const Tensor& x) { return fold_batch(autograd::cast(x, t), batch); };
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {q.size(-2), v.size(-1)});
  return attention_3d(folded(q), folded(k), folded(v), is_causal, scale.value_or(1.0 / std::sqrt(double(q.size(-1))))).reshape(out_shape);
}

}  // namespace ampgrad
