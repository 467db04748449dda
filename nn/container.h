// container.h — Sequential: runs its modules in order, each one's output the next one's input; and
// checkpoint_sequential, which runs one with its activations recomputed in backward.
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
#include "autograd/checkpoint.h"
#include "nn/module.h"

namespace ampgrad::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... Ms> explicit Sequential(std::shared_ptr<Ms>... modules) { (push_back(std::move(modules)), ...); }
  void push_back(std::shared_ptr<Module> m) { register_module(std::to_string(size()), std::move(m)); }
  size_t size() const { return children().size(); }
  std::shared_ptr<Module> operator[](size_t i) const { return children().at(i); }

  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (const auto& m : children()) y = m->forward(y);
    return y;
  }
};

// torch.utils.checkpoint.checkpoint_sequential: splits `seq` into `segments` runs of
// size() / segments modules (the last takes the rest) and checkpoints all but the last, which
// backward reaches first and would only rerun at once. The step then keeps the segments' inputs
// and one segment's activations at a time (autograd/checkpoint.h).
inline Tensor checkpoint_sequential(const Sequential& seq, int64_t segments, const Tensor& x) {
  const int64_t n = int64_t(seq.size());
  AMPGRAD_CHECK(segments >= 1 && segments <= std::max<int64_t>(n, 1),
                "checkpoint_sequential: segments must be in [1, " << n << "] for " << n << " modules, got " << segments);
  const std::vector<std::shared_ptr<Module>> mods = seq.children();
  auto run = [mods](int64_t begin, int64_t end, Tensor y) {
    for (int64_t i = begin; i < end; ++i) y = mods[i]->forward(y);
    return y;
  };
  const int64_t size = n / segments;
  Tensor y = x;
  for (int64_t s = 0; s + 1 < segments; ++s)
    y = checkpoint([run, s, size](const std::vector<Tensor>& in) { return run(s * size, (s + 1) * size, in[0]); }, {y});
  return run((segments - 1) * size, n, y);
}

}  // namespace ampgrad::nn
