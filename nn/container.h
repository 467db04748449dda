// container.h — Sequential: runs its modules in order, each one's output the next one's input.
// (Run with its activations recomputed in backward, it is nn/checkpoint.h's.)
// Children are named "0", "1", ... so parameters read "0.weight", "2.bias" as in PyTorch.
//
//   auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(784, 128),
//                                               std::make_shared<nn::ReLU>());
//   net->push_back(std::make_shared<nn::Linear>(128, 10));      // named "2"
//   Tensor logits = net->forward(x);
//
// The constructor's arguments are made in an order C++ leaves to the compiler, so two layers that
// draw their weights from one generator belong in separate push_backs where the draws must not
// depend on the compiler (examples/mnist/models.cpp).
#pragma once
#include "nn/module.h"

namespace ampgrad::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... Ms> explicit Sequential(std::shared_ptr<Ms>... modules) { (push_back(std::move(modules)), ...); }
  void push_back(std::shared_ptr<Module> m) { register_module(std::to_string(size()), std::move(m)); }
  size_t size() const { return children().size(); }
  std::shared_ptr<Module> operator[](size_t i) const {
    AMPGRAD_CHECK(i < size(), "Sequential: index " << i << " is out of range for its " << size() << " modules");
    return children()[i];
  }

  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (const auto& m : children()) y = m->forward(y);
    return y;
  }
};

}  // namespace ampgrad::nn
