// model.h — a GPT in the shape of GPT-2 and nanoGPT, small enough to train on a CPU: token and
// position embeddings, n_layer pre-norm blocks (causal self-attention, then a GELU MLP, each
// around a residual), a final LayerNorm and a linear head over the vocabulary. Weights as GPT-2
// initialises them. No weight tying, no KV cache: generation reruns the context.
// Shape letters: B batch, T time (≤ block_size), C n_embd, H n_head, E = C / H, V vocab_size.
//
//   gpt::GPT model({.vocab_size = 65});
//   Tensor logits = model.forward(idx);    // idx int64 (B, T) -> (B, T, V)
#pragma once
#include <memory>

#include "nn/nn.h"

namespace gpt {
using ampgrad::Tensor;
namespace nn = ampgrad::nn;

struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 64;  // the longest context
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_embd = 64;
  double dropout = 0.0;
};

class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const GPTConfig& c);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)

  std::shared_ptr<nn::Linear> c_attn, c_proj;  // q, k, v in one GEMM; the heads' outputs mixed
  std::shared_ptr<nn::Dropout> resid_dropout;
  int64_t n_head;
  double attn_dropout_p;  // on the attention weights, in train mode
};

class MLP : public nn::Module {
 public:
  explicit MLP(const GPTConfig& c);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C), through 4C

  std::shared_ptr<nn::Linear> c_fc, c_proj;
  std::shared_ptr<nn::Dropout> drop;
};

class Block : public nn::Module {
 public:
  explicit Block(const GPTConfig& c);
  Tensor forward(const Tensor& x) override;  // x + attn(ln_1(x)), then + mlp(ln_2(·))

  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<MLP> mlp;
};

class GPT : public nn::Module {
 public:
  explicit GPT(const GPTConfig& c);
  // idx int64 (B, T) -> logits (B, T, V). checkpoint_segments > 0 recomputes the blocks'
  // activations in backward, in that many segments (nn::checkpoint_sequential).
  Tensor forward(const Tensor& idx) override { return forward(idx, 0); }
  Tensor forward(const Tensor& idx, int64_t checkpoint_segments);

  GPTConfig config;
  std::shared_ptr<nn::Embedding> wte, wpe;  // token (V, C), position (block_size, C)
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::Sequential> h;        // the blocks
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> lm_head;      // (V, C), no bias
};

}  // namespace gpt
