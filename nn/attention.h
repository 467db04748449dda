// attention.h — scaled dot-product attention, as torch.nn.functional.scaled_dot_product_attention:
// softmax(q kᵀ · scale + mask) v. Without a mask tensor or dropout it is one fused op, ampgrad's
// scaled_dot_product_attention (autograd/attention.cpp: the causal mask inside its softmax); with
// them, PyTorch's "math" path, composed of the library's ops, so its backward comes free and
// autocast applies op by op: both GEMMs run in 16 bits, and on CUDA the softmax in float32.
// Shape letters: B batch (any leading dims, heads included), L queries, S keys, E head dim.
//
//   Tensor y = nn::functional::scaled_dot_product_attention(q, k, v, {.is_causal = true});
//   // q (B, H, T, E), k (B, H, T, E), v (B, H, T, Ev) -> y (B, H, T, Ev)
#pragma once
#include <optional>

#include "autograd/ops.h"

namespace ampgrad::nn::functional {

struct AttentionOptions {
  Tensor attn_mask = {};          // (L, S), broadcast: bool (true = may attend), or float32 or q's dtype (added)
  double dropout_p = 0.0;         // on the attention weights; pass 0 in eval, as in PyTorch
  bool is_causal = false;         // query i attends to keys 0..i
  std::optional<double> scale = {};  // default 1/√E
  Generator* generator = nullptr;  // for dropout (not owned); null: the default generator
};

// q (B, L, E), k (B, S, E), v (B, S, Ev) -> (B, L, Ev). A query that a mask hides every key from
// gets zero output (PyTorch's behaviour since 2.5), not NaN.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options = {});

}  // namespace ampgrad::nn::functional
