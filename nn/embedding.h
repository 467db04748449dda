// embedding.h — Embedding: a learned table of num_embeddings vectors, looked up by int64 index
// (a token's id, a position). Weights ~ N(0, 1), as PyTorch's. The op is autograd's embedding().
// Shape letters: V num_embeddings, D embedding_dim.
//
//   auto tok = std::make_shared<nn::Embedding>(65, 32);
//   Tensor h = tok->forward(ids);       // ids int64 (B, T) -> (B, T, 32)
#pragma once
#include "autograd/ops.h"
#include "nn/init.h"
#include "nn/module.h"

namespace ampgrad::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim) {
    AMPGRAD_CHECK(num_embeddings > 0 && embedding_dim > 0,
                  "Embedding: sizes must be positive, got (" << num_embeddings << ", " << embedding_dim << ")");
    weight = register_parameter("weight", init::normal_(empty({num_embeddings, embedding_dim})));
  }
  Tensor forward(const Tensor& indices) override { return embedding(indices, weight); }

  Tensor weight;  // (V, D)
};

}  // namespace ampgrad::nn
