// model.cpp — the GPT's layers, each forward on a few lines, and GPT-2's initialisation.
#include "gpt/model.h"

#include <cmath>

#include "nn/attention.h"
#include "nn/checkpoint.h"

namespace gpt {
using namespace ampgrad;

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c) : n_head(c.n_head), attn_dropout_p(c.dropout) {
  AMPGRAD_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd " << c.n_embd << " is not a multiple of n_head " << c.n_head);
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  Tensor qkv = c_attn->forward(x);  // (B, T, 3C)
  auto heads = [&](int64_t i) {     // the i-th C columns as (B, H, T, E)
    return qkv.narrow(2, i * C, C).reshape({B, T, n_head, C / n_head}).transpose(1, 2);
  };
  Tensor y = nn::functional::scaled_dot_product_attention(heads(0), heads(1), heads(2),
                                                          {.dropout_p = is_training() ? attn_dropout_p : 0.0, .is_causal = true});
  y = y.transpose(1, 2).reshape({B, T, C});  // the heads side by side again
  return resid_dropout->forward(c_proj->forward(y));
}

MLP::MLP(const GPTConfig& c) {
  c_fc = register_module("c_fc", std::make_shared<nn::Linear>(c.n_embd, 4 * c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4 * c.n_embd, c.n_embd));
  drop = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout));
}

Tensor MLP::forward(const Tensor& x) { return drop->forward(c_proj->forward(gelu(c_fc->forward(x)))); }

Block::Block(const GPTConfig& c) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(Shape{c.n_embd}));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(c));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(Shape{c.n_embd}));
  mlp = register_module("mlp", std::make_shared<MLP>(c));
}

Tensor Block::forward(const Tensor& x) {
  Tensor y = x + attn->forward(ln_1->forward(x));
  return y + mlp->forward(ln_2->forward(y));
}

GPT::GPT(const GPTConfig& c) : config(c) {
  AMPGRAD_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
                "GPT: every size must be positive (vocab " << c.vocab_size << ", block " << c.block_size << ", layers "
                                                           << c.n_layer << ", heads " << c.n_head << ", embd " << c.n_embd << ")");
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd));
  drop = register_module("drop", std::make_shared<nn::Dropout>(c.dropout));
  h = register_module("h", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < c.n_layer; ++i) h->push_back(std::make_shared<Block>(c));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{c.n_embd}));
  lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.n_embd, c.vocab_size, false));
  // GPT-2's initialisation: every weight ~ N(0, 0.02), biases 0, and the two projections that add
  // into the residual stream scaled by 1/√(2·n_layer), so its variance does not grow with depth.
  // (LayerNorms keep weight 1, bias 0.)
  for (auto& [name, p] : named_parameters()) {
    if (name.find("ln_") != std::string::npos) continue;
    const bool residual = name.ends_with("c_proj.weight");
    if (name.ends_with(".bias")) nn::init::zeros_(p);
    else nn::init::normal_(p, 0.0, residual ? 0.02 / std::sqrt(2.0 * c.n_layer) : 0.02);
  }
}

Tensor GPT::forward(const Tensor& idx, int64_t checkpoint_segments) {
  AMPGRAD_CHECK(idx.dim() == 2 && idx.size(1) <= config.block_size,
                "GPT: expected token ids (B, T) with T <= block_size " << config.block_size << ", got " << shape_str(idx.shape()));
  const int64_t T = idx.size(1);
  Tensor pos = arange(T, TensorOptions(kInt64).device(idx.device()));
  Tensor x = drop->forward(wte->forward(idx) + wpe->forward(pos));  // (B, T, C) + (T, C)
  x = checkpoint_segments ? nn::checkpoint_sequential(*h, checkpoint_segments, x) : h->forward(x);
  return lm_head->forward(ln_f->forward(x));  // (B, T, V)
}

}  // namespace gpt
