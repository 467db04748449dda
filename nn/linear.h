// linear.h — Linear: y = x Wᵀ + b, PyTorch's default initialisation. The op itself (forward
// and backward) is autograd's linear(); this file only owns the parameters.
// Shape letters: N batch (any leading dims), Din/Dout features.
//
//   auto fc = std::make_shared<nn::Linear>(784, 10);
//   Tensor logits = fc->forward(x);     // x (N, 784) -> (N, 10)
#pragma once
#include "nn/module.h"

namespace ampgrad::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;  // x (N, Din) -> (N, Dout)
  void reset_parameters();                   // W, b ~ U(−1/√Din, 1/√Din)

  Tensor weight;  // (Dout, Din)
  Tensor bias;    // (Dout), undefined without bias
};

}  // namespace ampgrad::nn
