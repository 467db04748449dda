// normalization.h — LayerNorm over the trailing dims, with an optional learned scale and shift
// (weight = 1, bias = 0 initially, as in PyTorch). The op itself is autograd's layer_norm().
//
//   auto ln = std::make_shared<nn::LayerNorm>(Shape{64});
//   Tensor y = ln->forward(x);          // x (N, T, 64): each row normalised to mean 0, var 1
#pragma once
#include "autograd/ops.h"
#include "nn/module.h"

namespace ampgrad::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true)
      : normalized_shape(std::move(normalized_shape)), eps(eps) {
    if (!elementwise_affine) return;
    weight = register_parameter("weight", ones(this->normalized_shape));
    bias = register_parameter("bias", zeros(this->normalized_shape));
  }
  Tensor forward(const Tensor& x) override { return layer_norm(x, normalized_shape, weight, bias, eps); }

  Shape normalized_shape;
  double eps;
  Tensor weight, bias;  // normalized_shape each, undefined without elementwise_affine
};

}  // namespace ampgrad::nn
