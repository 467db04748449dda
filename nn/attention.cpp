// attention.cpp — scaled dot-product attention: the fused op where it applies, else composed from
// matmul, where, softmax and dropout (a mask tensor, dropout).
#include "nn/attention.h"

#include <cmath>

#include "amp/autocast.h"

namespace ampgrad::nn::functional {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  auto shapes = [&] { return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()); };
  AMPGRAD_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2),
                "scaled_dot_product_attention: expected q (..., L, E), k (..., S, E), v (..., S, Ev), got " << shapes());
  // Under autocast the GEMMs cast q, k and v to one dtype anyway, as PyTorch's autocast does.
  AMPGRAD_CHECK((q.dtype() == k.dtype() && k.dtype() == v.dtype()) || amp::is_enabled(q.device().type),
                "scaled_dot_product_attention: q, k and v must share a dtype, got " << dtype_name(q.dtype()) << ", "
                                                                                   << dtype_name(k.dtype()) << ", " << dtype_name(v.dtype()));
  const Tensor& mask_in = o.attn_mask;
  AMPGRAD_CHECK(!mask_in.defined() || mask_in.dtype() == kBool || mask_in.dtype() == kFloat32 || mask_in.dtype() == q.dtype(),
                "scaled_dot_product_attention: attn_mask must be bool, float32 or q's dtype (" << dtype_name(q.dtype()) << "), got "
                                                                                               << dtype_name(mask_in.dtype()));
  AMPGRAD_CHECK(!(o.is_causal && mask_in.defined()), "scaled_dot_product_attention: give attn_mask or is_causal, not both");
  AMPGRAD_CHECK(o.dropout_p >= 0 && o.dropout_p <= 1, "scaled_dot_product_attention: dropout_p must be in [0, 1], got " << o.dropout_p);
  // Without a mask tensor or dropout, one fused op (autograd/attention.cpp); this composite is its reference.
  if (!mask_in.defined() && o.dropout_p == 0) return ampgrad::scaled_dot_product_attention(q, k, v, o.is_causal, o.scale);
  const int64_t L = q.size(-2), S = k.size(-2);
  // Scale q and k by √|scale| each (q's sign carries a negative scale) rather than the product by
  // scale, as PyTorch's math path does: in float16 the product itself can overflow 65504 first.
  const double scale = o.scale.value_or(1.0 / std::sqrt(double(q.size(-1)))), root = std::sqrt(std::abs(scale));
  Tensor scores = matmul(q * (scale < 0 ? -root : root), (k * root).transpose(-2, -1));  // (B, L, S)
  if (o.is_causal) {  // query i sees keys 0..i; every query sees key 0, so no row is all hidden
    const TensorOptions on = TensorOptions(kInt64).device(q.device());
    scores = where(ge(arange(L, on).unsqueeze(1), arange(S, on).unsqueeze(0)), scores, scalar_like(-INFINITY, scores));
  }
  Tensor hidden, zero;  // hidden (B, L, 1): the queries a mask hides every key from
  if (mask_in.defined()) {
    const Tensor minus_inf = scalar_like(-INFINITY, scores);
    // added in the scores' dtype, as PyTorch adds it in place: the output keeps q's dtype
    scores = mask_in.dtype() == kBool ? where(mask_in, scores, minus_inf) : scores + to(mask_in, scores.dtype());
    // Such a row's softmax is 0/0. It gets zero weights instead, as PyTorch's _safe_softmax
    // gives them: a NaN there would reach every key's gradient through the second product.
    hidden = eq(max(scores.detach(), -1, true).first, minus_inf);
    zero = scalar_like(0, scores);
    scores = where(hidden, zero, scores);
  }
  Tensor weights = softmax(scores, -1);  // (B, L, S)
  if (hidden.defined()) weights = where(hidden, zero, weights);
  if (o.dropout_p > 0) weights = dropout(weights, o.dropout_p, true, o.generator);
  return matmul(weights, v);  // (B, L, Ev)
}

}  // namespace ampgrad::nn::functional
