// attention.cpp — scaled dot-product attention from matmul, where, softmax and dropout.
#include "nn/attention.h"

#include <cmath>

namespace ampgrad::nn::functional {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  auto shapes = [&] { return "q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()); };
  AMPGRAD_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2),
                "scaled_dot_product_attention: expected q (..., L, E), k (..., S, E), v (..., S, Ev), got " << shapes());
  AMPGRAD_CHECK(!(o.is_causal && o.attn_mask.defined()), "scaled_dot_product_attention: give attn_mask or is_causal, not both");
  AMPGRAD_CHECK(o.dropout_p >= 0 && o.dropout_p < 1, "scaled_dot_product_attention: dropout_p must be in [0, 1), got " << o.dropout_p);
  const int64_t L = q.size(-2), S = k.size(-2);
  // Scale q and k by √scale each rather than the product by scale, as PyTorch's math path does:
  // in float16 the product itself can overflow 65504 before it is scaled back.
  const double sqrt_scale = std::sqrt(o.scale.value_or(1.0 / std::sqrt(double(q.size(-1)))));
  Tensor scores = matmul(q * sqrt_scale, (k * sqrt_scale).transpose(-2, -1));  // (B, L, S)
  Tensor mask = o.attn_mask;
  if (o.is_causal) {  // lower triangle: key j ≤ query i
    const TensorOptions on = TensorOptions(kInt64).device(q.device());
    mask = ge(arange(L, on).unsqueeze(1), arange(S, on).unsqueeze(0));
  }
  if (mask.defined())
    scores = mask.dtype() == kBool ? where(mask, scores, scalar_like(-INFINITY, scores)) : scores + mask;
  Tensor weights = softmax(scores, -1);
  if (o.dropout_p > 0) weights = dropout(weights, o.dropout_p, true, o.generator);
  return matmul(weights, v);
}

}  // namespace ampgrad::nn::functional
